"""Per-rank MPI wait statistics of a strobe run, computed with Dask.

For every rank and MPI function: calls, total, mean and longest time in
the call (ns), and per rank the share of its run spent in MPI. The regions
are read from the run's Parquet dataset (``strobe convert -f parquet``);
given profile databases, the script converts them first.

    python mpi_wait_stats.py RUN_OR_DATASET                      # a LocalCluster here
    python mpi_wait_stats.py RUN --scheduler tcp://head:8786 --output /shared/run.parquet

On a real cluster the dataset must be readable by every worker: pass
``--output`` on a shared file system (or a dataset already there). Without
``--scheduler`` the script starts a small ``distributed.LocalCluster``
(two workers, threads in this process). ``--csv FILE`` also writes the
table.
"""

import argparse
import sys

import strobe.dask


def wait_stats(regions):
    """(rank, name) → count, total_ns, mean_ns, max_ns of the MPI calls
    (regions of category ``mpi``), as a pandas DataFrame sorted by rank,
    then total time (longest first), then name."""
    mpi = regions[regions["category"] == "mpi"][["rank", "name", "duration"]]
    stats = mpi.groupby(["rank", "name"])["duration"].agg(["count", "sum", "max"]).compute()
    stats = stats.rename(columns={"sum": "total_ns", "max": "max_ns"}).reset_index()
    stats["mean_ns"] = stats["total_ns"] / stats["count"]
    stats = stats[["rank", "name", "count", "total_ns", "mean_ns", "max_ns"]]
    return stats.sort_values(["rank", "total_ns", "name"], ascending=[True, False, True]).reset_index(drop=True)


def rank_shares(stats, processes):
    """Per rank: time in MPI and its share of the rank's run (start to end)."""
    procs = processes[processes["rank"] >= 0][["rank", "start", "end"]].compute()
    per_rank = stats.groupby("rank")["total_ns"].sum().rename("mpi_ns").reset_index()
    out = per_rank.merge(procs, on="rank", how="left")
    out["run_ns"] = out["end"] - out["start"]
    out["mpi_share"] = out["mpi_ns"] / out["run_ns"]
    return out[["rank", "mpi_ns", "run_ns", "mpi_share"]]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("source", help="a run directory, profile databases, or a Parquet dataset")
    ap.add_argument("--scheduler", help="address of a Dask scheduler (default: a LocalCluster here)")
    ap.add_argument("--output", help="where to write the dataset when converting (shared by the workers)")
    ap.add_argument("--workers", type=int, default=2, help="LocalCluster workers (default 2)")
    ap.add_argument("--csv", help="also write the per-call table to this CSV file")
    a = ap.parse_args(argv)

    from distributed import Client, LocalCluster

    if a.scheduler:
        client = Client(a.scheduler)
        cluster = None
    else:
        cluster = LocalCluster(
            n_workers=a.workers, threads_per_worker=1, processes=False, dashboard_address=None
        )
        client = Client(cluster)
    try:
        # Convert once (on this machine), then read both tables from it.
        path = strobe.dask.dataset(a.source, output=a.output)
        regions = strobe.dask.read(path, "regions", columns=["rank", "category", "name", "duration"])
        processes = strobe.dask.read(path, "processes", columns=["rank", "start", "end"])
        stats = wait_stats(regions)
        shares = rank_shares(stats, processes)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()

    if stats.empty:
        print("no MPI calls in this run (regions of category 'mpi')", file=sys.stderr)
        return 1
    with_units = stats.assign(
        total_ms=stats["total_ns"] / 1e6, mean_us=stats["mean_ns"] / 1e3, max_us=stats["max_ns"] / 1e3
    )[["rank", "name", "count", "total_ms", "mean_us", "max_us"]]
    print(with_units.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print()
    for r in shares.itertuples():
        share = "" if r.run_ns != r.run_ns else f" ({100 * r.mpi_share:.1f}% of its run)"
        print(f"rank {r.rank}: {r.mpi_ns / 1e6:.3f} ms in MPI{share}")
    if a.csv:
        stats.to_csv(a.csv, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
