#!/usr/bin/env bash
# Compares strobe's XPTI dispatcher (libstrobe_xpti.so) with Intel's
# (libxptifw.so) under Intel's real SYCL runtime (oneAPI 2026.2 from PyPI, on
# the CPU OpenCL device), notification by notification.
#
#  1. Creates the Python venv when missing (scripts/sycl-venv.sh: dpctl, dpnp,
#     intel-opencl-rt; ~880 MB of wheels); exits 3 when this machine cannot
#     have it (disk, PyPI), as that script does.
#  2. Builds tests/programs/xpti_count_subscriber.c, linked like Intel's
#     collectors against a library with the SONAME libxptifw.so.1.
#  3. For each workload (dpnp, dpctl) x (UR call tracing off, on) runs the
#     workload RUNS times under each dispatcher, alternating, with the counting
#     subscriber; compares the counts per (stream, trace type) and the
#     workload's stdout. The dpctl workload is deterministic: strobe must give
#     exactly Intel's counts in every run. The dpnp one is timing-dependent in
#     the SYCL runtime itself (whether a kernel has finished when the next one
#     is submitted changes node/edge/wait notifications and UR calls), so per
#     (stream, type) the range of strobe's counts must meet Intel's (rows
#     marked ~ vary from run to run).
#  4. Runs Intel's collector (libsycl_ur_trace_collector.so, what `sycl-trace`
#     loads) through both dispatchers and compares the [SYCL] and [UR] lines it
#     prints, with addresses and handles masked: the whole output for the
#     deterministic dpctl workload, the set of distinct lines (instance ids
#     masked too) for dpnp.
#  5. Prints wall times of the dpnp workload under each dispatcher, 5 runs
#     each, alternating (figures only; never a failure).
#
# Exits 0 only when everything matches.
#
# usage: scripts/sycl-check.sh
# environment:
#   STROBE_SYCL_VENV  the venv (default: target/sycl-venv)
#   STROBE_XPTI       strobe's dispatcher (default: target/debug/libstrobe_xpti.so)
#   STROBE_SYCL_WORK  scratch directory (default: target/sycl-check)
#   STROBE_SYCL_RUNS  runs per dispatcher and configuration (default: 4; with
#                     fewer, dpnp's timing-dependent counts may not meet)
#   STROBE_SYCL_TIMEOUT  seconds one workload run may take (default: 300)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
abspath() { realpath -m -- "$1"; }
venv="$(abspath "${STROBE_SYCL_VENV:-$root/target/sycl-venv}")"
strobe_xpti="$(abspath "${STROBE_XPTI:-$root/target/debug/libstrobe_xpti.so}")"
work="$(abspath "${STROBE_SYCL_WORK:-$root/target/sycl-check}")"
runs="${STROBE_SYCL_RUNS:-4}"
run_timeout="${STROBE_SYCL_TIMEOUT:-300}"

failures=()
fail() {
  failures+=("$*")
  echo "MISMATCH: $*"
}

# ---- 1. the venv -------------------------------------------------------------
# (exit status 3 from it: this machine cannot have the venv; passed on)
STROBE_SYCL_VENV="$venv" "$root/scripts/sycl-venv.sh" >/dev/null
python="$venv/bin/python"
intel_xpti="$venv/lib/libxptifw.so"
intel_collector="$venv/lib/libsycl_ur_trace_collector.so"
for f in "$intel_xpti" "$intel_collector" "$venv/lib/libintelocl.so"; do
  if [ ! -f "$f" ]; then
    echo "sycl-check: $f is missing from the venv" >&2
    exit 2
  fi
done
if [ ! -f "$strobe_xpti" ]; then
  echo "sycl-check: $strobe_xpti does not exist; build it with 'cargo build -p strobe-xpti'" >&2
  exit 2
fi
# The wheel's OpenCL .icd names a placeholder path; point the loader at the
# CPU runtime directly.
export OCL_ICD_FILENAMES="$venv/lib/libintelocl.so"

# ---- 2. the counting subscriber ------------------------------------------------
rm -rf "$work/lib" "$work/runs"
mkdir -p "$work/lib" "$work/runs"
# The subscriber is linked against Intel's copy (SONAME libxptifw.so.1) and has
# no run path: at run time its NEEDED libxptifw.so.1 is satisfied only by the
# dispatcher already loaded under that SONAME.
ln -s "$venv/lib/libxptifw.so.1" "$work/lib/libxptifw.so"
ln -s "$venv/lib/libxptifw.so.1" "$work/lib/libxptifw.so.1"
subscriber="$work/libxpti_count_subscriber.so"
cc -shared -fPIC -O2 -Wall -Wextra -Werror -o "$subscriber" \
  "$root/tests/programs/xpti_count_subscriber.c" -L"$work/lib" -lxptifw -ldl

echo "== dispatchers"
echo "intel:  $intel_xpti"
echo "strobe: $strobe_xpti"
soname_of() { readelf -d "$1" 2>/dev/null | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p'; }
strobe_soname="$(soname_of "$strobe_xpti")"
echo "strobe's SONAME: ${strobe_soname:-none} (Intel's: $(soname_of "$intel_xpti"))"
if [ "$strobe_soname" != "libxptifw.so.1" ]; then
  echo "note: subscribers linked against libxptifw.so.1 (Intel's collector, the counting"
  echo "      subscriber) cannot bind to a dispatcher with another SONAME"
fi
missing="$(comm -13 \
  <(nm -D --defined-only "$strobe_xpti" | awk '$3 ~ /^xpti/ {print $3}' | sort -u) \
  <(nm -D --defined-only "$intel_xpti" | awk '$2 == "T" && $3 ~ /^xpti/ {print $3}' | sort -u))"
if [ -n "$missing" ]; then
  echo "note: strobe's dispatcher lacks $(wc -l <<<"$missing") functions Intel's exports" \
    "(the SYCL runtime unloads a dispatcher that lacks one it needs):"
  tr '\n' ' ' <<<"$missing" | fold -s -w 76 | sed 's/^/      /'
  echo
fi

# ---- workloads -------------------------------------------------------------------
# The dpctl workload: tests/programs/sycl_dpctl_work.py (also run under
# `strobe sample --xpti` by crates/strobe-cli/tests/xpti.rs).
run_workload() { # NAME DISPATCHER SUBSCRIBER UR(on|off) OUT_PREFIX [VAR=VALUE...]
  local name="$1" dispatcher="$2" sub="$3" ur="$4" out="$5"
  shift 5
  local layers=""
  [ "$ur" = on ] && layers=UR_LAYER_TRACING
  local args
  if [ "$name" = dpnp ]; then
    args=(-c "import dpnp; print(int(dpnp.arange(10**6).sum()))")
  else
    args=("$root/tests/programs/sycl_dpctl_work.py")
  fi
  local rc=0
  env XPTI_TRACE_ENABLE=1 XPTI_FRAMEWORK_DISPATCHER="$dispatcher" \
    XPTI_SUBSCRIBERS="$sub" UR_ENABLE_LAYERS="$layers" "$@" \
    timeout "$run_timeout" "$python" "${args[@]}" >"$out.stdout" 2>"$out.stderr" || rc=$?
  echo "$rc" >"$out.rc"
  return 0
}

# ---- 3. counts ---------------------------------------------------------------------
# The comparison and the table, in awk. Input: count files named
# .../<intel|strobe>-<i>.counts; output: the table, then "RESULT match|differ".
compare_counts() { # MODE(exact|overlap) FILES...
  awk -F'\t' -v mode="$1" '
    BEGIN {
      split("2 graph_create 4 node_create 6 edge_create 8 region_begin 9 region_end " \
            "10 task_begin 11 task_end 12 barrier_begin 13 barrier_end 14 lock_begin " \
            "15 lock_end 16 signal 18 transfer_begin 19 transfer_end 20 thread_begin " \
            "21 thread_end 22 wait_begin 23 wait_end 24 function_begin 25 function_end " \
            "26 metadata 28 function_with_args_begin 29 function_with_args_end " \
            "32 mem_alloc_begin 33 mem_alloc_end 34 mem_release_begin 35 mem_release_end " \
            "36 mem_object_construct 37 mem_object_destruct 38 mem_object_associate " \
            "39 mem_object_release 40 offload_alloc_accessor 42 queue_create " \
            "43 queue_destroy 126 diagnostics 0 unknown_type", w, " ")
      for (i = 1; i in w; i += 2) tname[w[i]] = w[i + 1]
    }
    BEGIN {
      # empty files (no counts written) still count as runs
      for (i = 1; i < ARGC; i++) {
        n = split(ARGV[i], parts, "/")
        s = (parts[n] ~ /^intel/) ? "intel" : "strobe"
        fside[ARGV[i]] = s; fidx[ARGV[i]] = ++nfiles[s]
      }
    }
    FNR == 1 { side = fside[FILENAME]; idx = fidx[FILENAME] }
    /^# dispatcher/ { next }
    /^# / {
      sub(/^# /, "")
      key = $2 "\t(" $1 ")"; add(side, key, $3, "-"); next
    }
    NF >= 4 { key = $1 "\t" sprintf("%05d", $2); add(side, key, $3, $4) }
    function add(s, k, c, nm) {
      keys[k] = 1
      cnt[s, k, idx] = c; named[s, k, idx] = nm
    }
    function range(s, k, arr,    i, v, lo, hi) {
      lo = ""; hi = ""
      for (i = 1; i <= nfiles[s]; i++) {
        v = ((s, k, i) in arr) ? arr[s, k, i] : 0
        if (v == "-") return "-"
        v += 0
        if (lo == "" || v < lo) lo = v
        if (hi == "" || v > hi) hi = v
      }
      rlo = lo; rhi = hi
      return (lo == hi) ? lo : lo ".." hi
    }
    function same(k, arr,    ilo, ihi, slo, shi) {
      range("intel", k, arr); ilo = rlo; ihi = rhi
      range("strobe", k, arr); slo = rlo; shi = rhi
      if (mode == "exact") return ilo == ihi && slo == shi && ilo == slo
      return slo <= ihi && ilo <= shi
    }
    END {
      nk = 0
      for (k in keys) sorted[++nk] = k
      for (i = 2; i <= nk; i++) {            # insertion sort: few keys
        v = sorted[i]
        for (j = i - 1; j >= 1 && sorted[j] > v; j--) sorted[j + 1] = sorted[j]
        sorted[j + 1] = v
      }
      printf "  %-28s %-30s %10s %10s %10s %10s\n", "stream", "trace type", \
        "intel", "strobe", "intel:nm", "strobe:nm"
      bad = 0
      for (i = 1; i <= nk; i++) {
        k = sorted[i]; split(k, f, "\t")
        t = f[2]
        if (t ~ /^[0-9]+$/) {
          t += 0
          label = (t in tname) ? tname[t] : (t >= 128 ? "user_defined" : "?")
          t = sprintf("%d %s", t, label)
        }
        ic = range("intel", k, cnt); sc = range("strobe", k, cnt)
        inm = range("intel", k, named); snm = range("strobe", k, named)
        vary = (ic sc inm snm) ~ /\.\./
        ok = same(k, cnt) && (inm == "-" || same(k, named))
        mark = ok ? (vary ? "~" : " ") : "!"
        if (!ok) bad = 1
        if (f[2] ~ /^\(/) {                  # per-stream rows: only when they differ
          if (ok) continue
          inm = snm = ""
          t = (f[2] == "(init)") ? "(xptiTraceInit calls)" : \
              (f[2] == "(finish)") ? "(xptiTraceFinish calls)" : "(refused registrations)"
        }
        printf "%s %-28s %-30s %10s %10s %10s %10s\n", mark, f[1], t, ic, sc, inm, snm
        if (!ok) {
          d = sprintf("%s %s: intel %s, strobe %s", f[1], t, ic, sc)
          if (inm != "") d = d sprintf(" (named: intel %s, strobe %s)", inm, snm)
          diffs[++ndiffs] = d
        }
      }
      for (i = 1; i <= nk; i++) {
        if (sorted[i] !~ /\t\(init\)$/) continue
        if (range("intel", sorted[i], cnt) != "0") ni++
        if (range("strobe", sorted[i], cnt) != "0") ns++
      }
      printf "  streams announced to the subscriber (xptiTraceInit): intel %d, strobe %d\n", ni, ns
      for (i = 1; i <= ndiffs; i++) print "DIFF " diffs[i]
      print "RESULT " (bad ? "differ" : "match")
    }' "${@:2}"
}

total() { grep -hv '^#' "$@" 2>/dev/null | awk -F'\t' '{s += $3} END {print s + 0}'; }
echo
echo "== counts per stream and trace type ($runs runs per dispatcher, alternating)"
echo "   (nm: notifications whose payload has a name; a..b: range over the runs;"
echo "   ~: varies from run to run, the ranges must meet; !: differs)"
for wl in dpnp dpctl; do
  for ur in off on; do
    cfg="$wl-ur_$ur"
    dir="$work/runs/$cfg"
    mkdir -p "$dir"
    for i in $(seq 1 "$runs"); do
      for side in intel strobe; do
        disp="$intel_xpti"
        [ "$side" = strobe ] && disp="$strobe_xpti"
        run_workload "$wl" "$disp" "$subscriber" "$ur" "$dir/$side-$i" \
          XPTI_COUNT_OUT="$dir/$side-$i.counts"
      done
    done
    echo
    echo "-- $wl, UR call tracing $ur"
    ok=1
    for side in intel strobe; do
      disp="$intel_xpti"
      [ "$side" = strobe ] && disp="$strobe_xpti"
      no_counts=""
      for i in $(seq 1 "$runs"); do
        p="$dir/$side-$i"
        rc="$(cat "$p.rc")"
        if [ "$rc" != 0 ]; then
          fail "$cfg: run $i under $side's dispatcher exited with status $rc; stderr ($p.stderr) ends:"
          tail -n 5 "$p.stderr" | sed 's/^/      /'
          ok=0
        fi
        if ! cmp -s "$p.stdout" "$dir/intel-1.stdout"; then
          fail "$cfg: run $i under $side's dispatcher printed '$(head -c 200 "$p.stdout")'," \
            "Intel's run 1 printed '$(head -c 200 "$dir/intel-1.stdout")'"
          ok=0
        fi
        if [ ! -s "$p.counts" ]; then
          no_counts="$no_counts $i"
          touch "$p.counts"
          continue
        fi
        bound="$(sed -n 's/^# dispatcher\t//p' "$p.counts")"
        if [ "$(abspath "$bound")" != "$(abspath "$disp")" ]; then
          fail "$cfg: under $side's dispatcher the subscriber's xpti calls went to $bound"
          ok=0
        fi
      done
      if [ -n "$no_counts" ]; then
        fail "$cfg: under $side's dispatcher no counts were written (runs$no_counts): the" \
          "subscriber was never loaded (the runtime did not take the dispatcher, or the" \
          "subscriber could not be loaded against it)"
        grep -h -i -m 3 -E 'xpti|subscriber|dispatcher' "$dir/$side"-*.stderr | sed 's/^/      /' || true
        ok=0
      fi
    done
    # dpnp's counts depend on timing (whether a kernel has finished when the
    # next is submitted); dpctl's must be exact unless Intel's runs disagree
    mode=exact
    [ "$wl" = dpnp ] && mode=overlap
    for i in $(seq 2 "$runs"); do
      if ! cmp -s <(grep -v '^# dispatcher' "$dir/intel-1.counts") \
        <(grep -v '^# dispatcher' "$dir/intel-$i.counts"); then
        mode=overlap
      fi
    done
    table="$(compare_counts "$mode" "$dir"/intel-*.counts "$dir"/strobe-*.counts)"
    grep -v -E '^(RESULT|DIFF) ' <<<"$table"
    echo "  notifications, run 1: intel $(total "$dir/intel-1.counts"), strobe $(total "$dir/strobe-1.counts") (comparison: $mode)"
    if ! grep -q '^RESULT match' <<<"$table"; then
      fail "$cfg: counts differ: $(sed -n 's/^DIFF //p' <<<"$table" | awk '
        NR <= 6 { printf "%s%s", (NR > 1 ? "; " : ""), $0 }
        END { if (NR > 6) printf "; and %d more rows (see the table)", NR - 6; print "" }')"
      ok=0
    fi
    if [ "$ok" = 1 ]; then echo "  $cfg: match"; fi
  done
done

# ---- 4. Intel's collector through both dispatchers -------------------------------
# SYCL_TRACE_API_ENABLE: [SYCL] lines (stream sycl: tasks, queues, diagnostics);
# SYCL_TRACE_UR_ENABLE: [UR] lines (stream ur.call, needs the UR tracing layer);
# SYCL_TRACE_PRINT_FORMAT must be set (compact, verbose or classic).
collector_env=(SYCL_TRACE_API_ENABLE=1 SYCL_TRACE_UR_ENABLE=1 SYCL_TRACE_PRINT_FORMAT=compact)
mask() { sed -E 's/0x[0-9a-fA-F]+/0x_/g; s/[0-9]{9,}/_/g' "$1"; }
echo
echo "== Intel's collector ($(basename "$intel_collector")) through each dispatcher"
for wl in dpnp dpctl; do
  dir="$work/runs/collector-$wl"
  mkdir -p "$dir"
  for side in intel strobe; do
    disp="$intel_xpti"
    [ "$side" = strobe ] && disp="$strobe_xpti"
    run_workload "$wl" "$disp" "$intel_collector" on "$dir/$side" "${collector_env[@]}"
    if [ "$wl" = dpctl ]; then
      # deterministic: the whole output, in order
      mask "$dir/$side.stdout" >"$dir/$side.cmp"
    else
      # timing-dependent order and repetitions: the distinct [SYCL]/[UR] lines
      mask "$dir/$side.stdout" | grep -E '^\[(SYCL|UR)\]|^	' |
        sed -E 's/instanceID=[0-9]+/instanceID=_/' | sort -u >"$dir/$side.cmp" || true
    fi
  done
  lines() { grep -cE "^\[$1\]" "$2" || true; }
  echo "-- $wl: [SYCL] lines intel $(lines SYCL "$dir/intel.stdout"), strobe $(lines SYCL "$dir/strobe.stdout");" \
    "[UR] lines intel $(lines UR "$dir/intel.stdout"), strobe $(lines UR "$dir/strobe.stdout")"
  for side in intel strobe; do
    rc="$(cat "$dir/$side.rc")"
    if [ "$rc" != 0 ]; then
      fail "collector-$wl: the run under $side's dispatcher exited with status $rc; stderr ($dir/$side.stderr) ends:"
      tail -n 5 "$dir/$side.stderr" | sed 's/^/      /'
    fi
  done
  if [ "$(lines UR "$dir/intel.stdout")" = 0 ] || [ "$(lines SYCL "$dir/intel.stdout")" = 0 ]; then
    fail "collector-$wl: Intel's collector printed no [SYCL] or no [UR] lines under Intel's dispatcher"
  fi
  if cmp -s "$dir/intel.cmp" "$dir/strobe.cmp"; then
    echo "  collector-$wl: match"
  else
    fail "collector-$wl: the collector's output differs (masked; < intel, > strobe):"
    diff "$dir/intel.cmp" "$dir/strobe.cmp" | grep -E '^[<>]' | head -n 20 | sed 's/^/      /' || true
  fi
done

# ---- 5. wall times -------------------------------------------------------------------
echo
echo "== wall time of the dpnp workload (counting subscriber, UR call tracing on), ms"
printf "  %-4s %10s %10s\n" run intel strobe
times_intel=()
times_strobe=()
ns_now() { date +%s%N; }
for i in 1 2 3 4 5; do
  for side in intel strobe; do
    disp="$intel_xpti"
    [ "$side" = strobe ] && disp="$strobe_xpti"
    t0="$(ns_now)"
    run_workload dpnp "$disp" "$subscriber" on "$work/runs/time-$side-$i" \
      XPTI_COUNT_OUT="$work/runs/time-$side-$i.counts"
    t1="$(ns_now)"
    ms=$(((t1 - t0) / 1000000))
    if [ "$side" = intel ]; then times_intel+=("$ms"); else times_strobe+=("$ms"); fi
  done
  printf "  %-4s %10s %10s\n" "$i" "${times_intel[-1]}" "${times_strobe[-1]}"
done
median() { printf '%s\n' "$@" | sort -n | sed -n 3p; }
printf "  %-4s %10s %10s\n" median "$(median "${times_intel[@]}")" "$(median "${times_strobe[@]}")"

# ---- summary -------------------------------------------------------------------------
echo
if [ "${#failures[@]}" -eq 0 ]; then
  echo "sycl-check: strobe's dispatcher matches Intel's"
  exit 0
fi
echo "sycl-check: ${#failures[@]} mismatch(es):"
printf '  - %s\n' "${failures[@]}"
exit 1
