#!/usr/bin/env bash
# Runs stress-ng's signal, timer and process stressors RUNS times each with
# and without `strobe sample -q` and prints, per stressor, how many runs
# exited 0 with "successful run completed" (docs/benchmarks.md, "Trust").
#   scripts/stress-ng-compare.sh RUNS [STROBE]   (default target/release/strobe)
set -u
runs=${1:?usage: stress-ng-compare.sh RUNS [STROBE]}
strobe=${2:-target/release/strobe}
out=$(mktemp -d)
passed() { [ "$1" = 0 ] && grep -q "successful run completed" <<<"$2"; }
for s in sigsegv sigfpe sigtrap sigabrt signest sigfd sigsuspend sigq sigrt signal \
         itimer timer clone fork vfork pthread close dup; do
  with=0 without=0
  for _ in $(seq "$runs"); do
    text=$(timeout 60 "$strobe" sample -q --output-dir "$out" -- stress-ng --"$s" 1 -t 1 2>&1)
    passed $? "$text" && with=$((with + 1))
    rm -rf "${out:?}"/*
    text=$(timeout 60 stress-ng --"$s" 1 -t 1 2>&1)
    passed $? "$text" && without=$((without + 1))
  done
  echo "$s: with strobe $with/$runs, without $without/$runs"
done
rm -rf "$out"
