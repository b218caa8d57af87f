"""Benchmark: loading samples into a DataFrame with strobe vs pandas.read_sql.

    python bench_read.py [--db PATH] [--samples N] [--strobe-bench BIN]

Uses the database PATH, generating it first with `strobe-bench export
--rows 0 --samples N --db PATH` when it does not exist. Each reader runs in
a fresh interpreter so its peak RSS is its own; prints rows/s, seconds,
peak RSS over the interpreter's baseline and the DataFrame's size."""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, resource, sys, time
import pandas as pd
import strobe._profile
import sqlite3
def rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
what, db = sys.argv[1], sys.argv[2]
base = rss()
t0 = time.perf_counter()
if what == "strobe":
    df = strobe._profile.open(db).samples()
elif what == "strobe-chunks":
    n = 0
    size = 0
    for c in strobe._profile.open(db).samples(chunks=1_000_000):
        n += len(c)
        size = max(size, int(c.memory_usage(deep=True).sum()))
    dt = time.perf_counter() - t0
    print(json.dumps({"rows": n, "seconds": dt, "peak_rss": rss() - base, "df_bytes": size}))
    sys.exit(0)
else:
    con = sqlite3.connect(db)
    df = pd.read_sql("SELECT timestamp, pid, tid, kind, weight_ns, stack_id FROM strobe_samples", con)
dt = time.perf_counter() - t0
print(json.dumps({"rows": len(df), "seconds": dt, "peak_rss": rss() - base,
                  "df_bytes": int(df.memory_usage(deep=True).sum())}))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default="strobe-bench-read.db")
    ap.add_argument("--samples", type=int, default=10_000_000)
    ap.add_argument("--strobe-bench", default=str(REPO / "target" / "release" / "strobe-bench"))
    ap.add_argument("--skip-pandas", action="store_true", help="time strobe only")
    a = ap.parse_args()
    if not os.path.exists(a.db):
        out = Path(a.db).resolve().parent / "strobe-bench-read-out"
        subprocess.run([a.strobe_bench, "export", "--rows", "0", "--samples", str(a.samples),
                        "--db", a.db, "--formats", "folded", "--out-dir", str(out)], check=True)
    runs = ["strobe", "strobe-chunks"] + ([] if a.skip_pandas else ["pandas.read_sql"])
    results = {}
    for what in runs:
        r = subprocess.run([sys.executable, "-c", CHILD, what, a.db], check=True,
                           capture_output=True, text=True)
        res = json.loads(r.stdout.strip().splitlines()[-1])
        results[what] = res
        print(f"{what:16} {res['rows']:>11,} rows in {res['seconds']:7.2f} s = "
              f"{res['rows'] / res['seconds']:>12,.0f} rows/s; peak RSS +{res['peak_rss'] / 2**20:8.1f} MiB; "
              f"DataFrame {res['df_bytes'] / 2**20:8.1f} MiB "
              f"(peak/DataFrame {res['peak_rss'] / max(res['df_bytes'], 1):.2f})")
    if "pandas.read_sql" in results:
        print(f"speed-up over pandas.read_sql: "
              f"{results['pandas.read_sql']['seconds'] / results['strobe']['seconds']:.1f}x")


if __name__ == "__main__":
    main()
