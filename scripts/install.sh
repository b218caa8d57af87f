#!/usr/bin/env bash
# Installs strobe: builds the release binaries and copies
#   strobe                 -> PREFIX/bin/strobe
#   libstrobe_runtime.so   -> PREFIX/lib/strobe/libstrobe_runtime.so
#   libstrobe_xpti.so      -> PREFIX/lib/strobe/libstrobe_xpti.so (when built)
# where `strobe sample` finds its runtime (next to itself, or in
# ../lib/strobe/ relative to its own directory) and `strobe sample --xpti`
# its XPTI dispatcher (next to the runtime).
#
# usage: scripts/install.sh [--prefix DIR] [--from DIR]
#   --prefix DIR  install under DIR (default: ~/.local)
#   --from DIR    copy already-built files from DIR (e.g. target/release)
#                 instead of running `cargo build --release`
set -euo pipefail
prefix="${HOME}/.local"
from=""
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="$2"; shift 2 ;;
    --from) from="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
done
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ -z "$from" ]; then
  (cd "$root" && cargo build --release --workspace)
  from="$root/target/release"
fi
for f in strobe libstrobe_runtime.so; do
  if [ ! -f "$from/$f" ]; then
    echo "install.sh: $from/$f does not exist; build first (cargo build --release --workspace)" >&2
    exit 1
  fi
done
mkdir -p "$prefix/bin" "$prefix/lib/strobe"
install -m 0755 "$from/strobe" "$prefix/bin/strobe"
install -m 0755 "$from/libstrobe_runtime.so" "$prefix/lib/strobe/libstrobe_runtime.so"
echo "installed $prefix/bin/strobe and $prefix/lib/strobe/libstrobe_runtime.so"
if [ -f "$from/libstrobe_xpti.so" ]; then
  install -m 0755 "$from/libstrobe_xpti.so" "$prefix/lib/strobe/libstrobe_xpti.so"
  echo "installed $prefix/lib/strobe/libstrobe_xpti.so (the XPTI dispatcher of --xpti)"
fi
