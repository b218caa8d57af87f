#!/usr/bin/env bash
# Makes sure the Python venv with Intel's SYCL runtime (oneAPI 2026.2 from
# PyPI: dpctl, dpnp, intel-opencl-rt; ~880 MB of wheels, ~3 GB installed)
# exists, for scripts/sycl-check.sh and the tests that run the real runtime.
#
# Under a lock (concurrent callers wait for one another); the venv counts as
# there only once pip finished (a marker file), so a failed or interrupted
# install is started over, never used half made.
#
# Exit status: 0 the venv is there (prints its path); 3 it cannot be made on
# this machine (too little free disk, or pip cannot reach PyPI), with the
# reason on stderr; anything else is a failure.
#
# usage: scripts/sycl-venv.sh
# environment:
#   STROBE_SYCL_VENV  the venv (default: target/sycl-venv)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$(realpath -m -- "${STROBE_SYCL_VENV:-$root/target/sycl-venv}")"
# What the installed venv takes, with room left for the build beside it.
need_kb=$((5 * 1024 * 1024))

marker="$venv/.strobe-sycl-venv-complete"
ready() { [ -f "$marker" ] && [ -x "$venv/bin/python" ]; }

mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
if ready; then
  echo "$venv"
  exit 0
fi
free_kb="$(df -Pk "$(dirname "$venv")" | awk 'NR == 2 {print $4}')"
if [ "$free_kb" -lt "$need_kb" ]; then
  echo "sycl-venv: $((free_kb / 1024)) MiB free beside $venv; the SYCL venv needs" \
    "$((need_kb / 1024)) MiB" >&2
  exit 3
fi
rm -rf "$venv"
echo "sycl-venv: creating $venv (dpctl, dpnp, intel-opencl-rt: ~880 MB of wheels)" >&2
python3 -m venv "$venv"
log="$venv.pip.log"
if ! "$venv/bin/pip" install --no-cache-dir --quiet \
  dpctl==0.22.1 intel-opencl-rt==2026.2.0 dpnp==0.20.0 >"$log" 2>&1; then
  rm -rf "$venv"
  if grep -q -i -E 'connection|resolve|network|timed out|No matching distribution' "$log"; then
    echo "sycl-venv: pip cannot fetch the SYCL wheels from PyPI here:" >&2
    tail -n 3 "$log" >&2
    exit 3
  fi
  echo "sycl-venv: pip failed to install the SYCL wheels ($log):" >&2
  tail -n 20 "$log" >&2
  exit 1
fi
rm -f "$log"
touch "$marker"
echo "$venv"
