#!/usr/bin/env bash
# The Quick start: builds strobe, builds the bundled example program
# (tests/programs/hotspots.c, two hot functions taking 70% and 30% of the
# CPU time, across a shared-library boundary, compiled -O2 without frame
# pointers), and profiles it with `strobe sample`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
cargo build --release --workspace
out="$root/target/examples"
mkdir -p "$out"
cc -O2 -g -fomit-frame-pointer -shared -fPIC -o "$out/libhotlib.so" tests/programs/libhotlib.c
cc -O2 -g -fomit-frame-pointer -o "$out/hotspots" tests/programs/hotspots.c \
  -L"$out" -lhotlib -Wl,-rpath,"$out" -lpthread
exec "$root/target/release/strobe" sample --output-dir "$root/strobe-output" "$@" \
  -- "$out/hotspots" 0.7 2 1
