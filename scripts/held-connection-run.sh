#!/usr/bin/env bash
# A run while someone else holds a silent connection to its collector:
# `strobe sample -q -- sh -c 'sleep 1.5'` with, from its start, a process
# outside the run (user nobody when root) connected to the collector's
# socket and sending nothing for 30 s. Exits with strobe's status once
# strobe is done (the connection is then dropped). For timing against the
# same run without the connection (docs/benchmarks.md).
#   scripts/held-connection-run.sh [STROBE]   (default target/release/strobe)
set -u
cd "$(dirname "$0")/.."
strobe=${1:-target/release/strobe}
out=$(mktemp -d)
"$strobe" sample -q --output-dir "$out" -- sh -c 'sleep 1.5' &
run=$!
python3 tests/programs/connect_to_collector.py outsider "$run" 30 >/dev/null 2>&1 &
holder=$!
wait "$run"
status=$?
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
rm -rf "$out"
exit "$status"
