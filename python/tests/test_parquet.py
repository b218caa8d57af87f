"""Parquet datasets (``strobe convert -f parquet``) read by pyarrow, DuckDB
and Dask, and ``strobe.dask.read``: the same numbers as SQL over the
databases (``strobe query``), to the last nanosecond.

The MPI job's databases come from STROBE_TEST_MPI_RUN, written by the Rust
side (crates/strobe-cli/tests/mpi_fixture, through strobe_db::Writer):
crates/strobe-cli/tests/python_package.rs sets it; by hand, see
``write_the_mpi_fixture`` in crates/strobe-cli/tests/convert_parquet.rs."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import strobe
from conftest import REPO, run_strobe

pa = pytest.importorskip("pyarrow")
ds = pytest.importorskip("pyarrow.dataset")
duckdb = pytest.importorskip("duckdb")
dd = pytest.importorskip("dask.dataframe")
pytest.importorskip("distributed")

TABLES = ["processes", "threads", "regions", "samples", "stacks", "counters"]
# The views the tables come from, for their row counts.
VIEWS = {
    "processes": "processes",
    "threads": "threads",
    "regions": "regions",
    "samples": "strobe_samples",
    "counters": "strobe_counters",
}
EXAMPLE = REPO / "python" / "examples" / "mpi_wait_stats.py"


@pytest.fixture(scope="session")
def mpi_run() -> Path:
    d = os.environ.get("STROBE_TEST_MPI_RUN")
    if not d or not Path(d).is_dir():
        pytest.skip(
            "STROBE_TEST_MPI_RUN names no MPI fixture (cargo test -p strobe-cli --test python_package writes one)"
        )
    return Path(d)


@pytest.fixture(scope="session")
def mpi_dataset(mpi_run, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("parquet")
    r = run_strobe("convert", "-i", mpi_run, "-f", "parquet", "-o", "job", "-d", out)
    assert "M rows/s" in r.stderr, r.stderr
    return out / "job.parquet"


def query(inputs, sql) -> list:
    return json.loads(run_strobe("query", "-i", inputs, "--format", "json", sql).stdout)


def sql_wait_stats(inputs) -> pd.DataFrame:
    """Per rank and MPI call: count, total, mean, max, by SQL over the
    databases (`strobe query`)."""
    rows = query(
        inputs,
        """SELECT COALESCE((SELECT CAST(s.value AS INTEGER) FROM strobe_settings s
                             WHERE s.guid = r.guid AND s.name = 'mpi.rank'), -1) AS rank,
                  r.name, COUNT(*) AS count, SUM(r.duration) AS total_ns,
                  CAST(SUM(r.duration) AS REAL) / COUNT(*) AS mean_ns, MAX(r.duration) AS max_ns
           FROM regions r WHERE r.category = 'mpi' GROUP BY 1, 2""",
    )
    return normalise(pd.DataFrame(rows))


def normalise(df: pd.DataFrame) -> pd.DataFrame:
    df = df[["rank", "name", "count", "total_ns", "mean_ns", "max_ns"]].copy()
    for c in ["rank", "count", "total_ns", "max_ns"]:
        df[c] = df[c].astype("int64")
    df["name"] = df["name"].astype(str)
    df["mean_ns"] = df["mean_ns"].astype("float64")
    return df.sort_values(["rank", "name"]).reset_index(drop=True)


def duckdb_wait_stats(dataset: Path) -> pd.DataFrame:
    got = duckdb.sql(
        f"""SELECT rank, name, COUNT(*) AS count, SUM(duration) AS total_ns,
                   CAST(SUM(duration) AS DOUBLE) / COUNT(*) AS mean_ns, MAX(duration) AS max_ns
            FROM read_parquet('{dataset}/regions/*/*/*.parquet', hive_partitioning = true)
            WHERE category = 'mpi' GROUP BY ALL"""
    ).df()
    return normalise(got)


def test_layout_and_marker(mpi_dataset, mpi_run):
    marker = json.loads((mpi_dataset / "_strobe.json").read_text())
    assert marker["format"] == "strobe-parquet" and marker["processes"] == 4
    for t in TABLES:
        files = sorted(mpi_dataset.glob(f"{t}/node=*/rank=*/*.parquet"))
        assert files, t
        assert marker["tables"][t]["files"] == len(files)
    parts = sorted(p.parent.relative_to(mpi_dataset / "regions").as_posix() for p in mpi_dataset.glob("regions/*/*/*.parquet"))
    assert parts == ["node=node-a/rank=-1", "node=node-a/rank=0", "node=node-a/rank=1", "node=node-b/rank=2"]
    assert not list(mpi_dataset.parent.glob("*.partial"))


def test_pyarrow_reads_every_table_with_the_databases_row_counts(mpi_dataset, mpi_run):
    for t in TABLES:
        table = ds.dataset(mpi_dataset / t, format="parquet", partitioning="hive").to_table()
        assert "node" in table.column_names and "rank" in table.column_names
        if t in VIEWS:
            n = query(mpi_run, f"SELECT COUNT(*) AS n FROM {VIEWS[t]}")[0]["n"]
            assert table.num_rows == n, t
    regions = ds.dataset(mpi_dataset / "regions", format="parquet", partitioning="hive").to_table().to_pandas()
    # The MPI arguments: typed columns and the JSON text agree.
    mpi = regions[regions["category"] == "mpi"]
    sends = mpi[mpi["name"] == "MPI_Send"]
    assert (sends["bytes"] == 8192).all() and (sends["tag"] == 1).all() and (sends["comm"] == "world").all()
    assert ((sends["peer"] - sends["rank"]) % 3 == 1).all()
    for _, r in sends.head(5).iterrows():
        a = json.loads(r["args"])
        assert (a["bytes"], a["peer"], a["comm"], a["comm_size"]) == (8192, r["peer"], "world", 3)
        assert isinstance(a["flow_out"], int)
    allreduce = mpi[mpi["name"] == "MPI_Allreduce"]
    assert (allreduce["comm"] == "world.1").all() and allreduce["peer"].isna().all()
    # Raw and aligned times: rank 0 and the launcher (node-a) move by their
    # node's constant shift; ranks 1 and 2 follow their measured offset to
    # rank 0's clock, which drifts over the run.
    shift = (regions["start_aligned"] - regions["start"]).groupby(regions["rank"]).nunique()
    assert shift[-1] == 1 and shift[0] == 1 and shift[1] > 10 and shift[2] > 10


def test_stacks_rebuild_the_samples_leaves(mpi_dataset, mpi_run):
    con = duckdb.connect()
    got = con.sql(
        f"""SELECT s.function, COUNT(*) AS n
            FROM read_parquet('{mpi_dataset}/samples/*/*/*.parquet') s
            JOIN read_parquet('{mpi_dataset}/stacks/*/*/*.parquet') k
              ON k.guid = s.guid AND k.stack_id = s.stack_id AND k.depth = 0
            WHERE s.function = k.function GROUP BY ALL ORDER BY 1"""
    ).fetchall()
    total = con.sql(f"SELECT COUNT(*) FROM read_parquet('{mpi_dataset}/samples/*/*/*.parquet')").fetchall()[0][0]
    assert sum(n for _, n in got) == total
    leaves = {f for f, _ in got}
    assert {"solver::kernel", "MPI_Waitall", "libmpi.so.40+0x4abc"} <= leaves
    # Inclusive samples of solver::step: every stack passes through it.
    incl = con.sql(
        f"""SELECT COUNT(DISTINCT s.timestamp || s.guid)
            FROM read_parquet('{mpi_dataset}/samples/*/*/*.parquet') s
            JOIN read_parquet('{mpi_dataset}/stacks/*/*/*.parquet') k
              ON k.guid = s.guid AND k.stack_id = s.stack_id
            WHERE k.function = 'solver::step'"""
    ).fetchall()[0][0]
    assert incl == total


def test_wait_statistics_agree_exactly_across_sql_duckdb_and_dask(mpi_dataset, mpi_run):
    want = sql_wait_stats(mpi_run)
    assert len(want) == 3 * 7 and set(want["rank"]) == {0, 1, 2}
    pd.testing.assert_frame_equal(duckdb_wait_stats(mpi_dataset), want, check_exact=True)

    regions = strobe.dask.read(mpi_dataset, "regions", columns=["rank", "category", "name", "duration"])
    assert isinstance(regions, dd.DataFrame)
    assert str(regions["rank"].dtype) == "int64"
    mpi = regions[regions["category"] == "mpi"]
    agg = mpi.groupby(["rank", "name"])["duration"].agg(["count", "sum", "max"]).compute().reset_index()
    agg = agg.rename(columns={"sum": "total_ns", "max": "max_ns"})
    agg["mean_ns"] = agg["total_ns"] / agg["count"]
    pd.testing.assert_frame_equal(normalise(agg), want, check_exact=True)
    # The rank waiting longest in MPI_Barrier is rank 0 (the last computes longest).
    barrier = want[want["name"] == "MPI_Barrier"].set_index("rank")["total_ns"]
    assert barrier.idxmax() == 0 and barrier.idxmin() == 2


def test_dask_read_converts_databases_and_caches_the_dataset(mpi_run, tmp_path, monkeypatch):
    monkeypatch.setenv("STROBE_PARQUET_CACHE", str(tmp_path / "cache"))
    samples = strobe.dask.read(mpi_run, "samples")
    n = query(mpi_run, "SELECT COUNT(*) AS n FROM strobe_samples")[0]["n"]
    assert len(samples) == n
    made = list((tmp_path / "cache").glob("*.parquet"))
    assert len(made) == 1 and strobe.dask.is_dataset(made[0])
    stamp = (made[0] / "_strobe.json").stat().st_mtime_ns
    # The same inputs again: the dataset is reused, not written again.
    counters = strobe.dask.read([str(p) for p in sorted(mpi_run.rglob("*.db"))], "counters")
    assert len(counters) == query(mpi_run, "SELECT COUNT(*) AS n FROM strobe_counters")[0]["n"]
    assert (made[0] / "_strobe.json").stat().st_mtime_ns == stamp
    # A window is a different dataset, converted with it.
    part = strobe.dask.read(mpi_run / "node-a", "regions", start="25%", end="50%", columns=["rank", "duration"])
    n_part = json.loads(
        run_strobe("query", "-i", mpi_run / "node-a", "--start", "25%", "--end", "50%", "--format", "json",
                   "SELECT COUNT(*) AS n FROM regions").stdout
    )[0]["n"]
    assert 0 < len(part) == n_part
    # Filters on the partitions read only those files.
    r1 = strobe.dask.read(mpi_run, "regions", filters=[("rank", "==", 1)], columns=["rank", "guid"]).compute()
    assert set(r1["rank"]) == {1} and r1["guid"].nunique() == 1


def test_dask_read_of_a_real_run(regions_db, tmp_path):
    out = tmp_path / "real.parquet"
    regions = strobe.dask.read(regions_db, "regions", output=out).compute()
    want = strobe.open(regions_db).regions()
    assert len(regions) == len(want)
    assert sorted(regions["name"].astype(str)) == sorted(want["name"].astype(str))
    assert (regions["rank"] == -1).all()
    assert strobe.dask.is_dataset(out)


def test_the_streaming_writer_writes_a_dataset(regions_db, tmp_path):
    p = strobe.open(regions_db)
    with strobe.export.writer(tmp_path / "w.parquet", format="parquet") as w:
        w.write(p.regions())
    assert "regions" in w.result
    got = strobe.dask.read(tmp_path / "w.parquet", "regions").compute()
    assert len(got) == len(p.regions())


def test_errors(tmp_path, mpi_dataset, mpi_run):
    with pytest.raises(ValueError, match="unknown table"):
        strobe.dask.read(mpi_dataset, "kernels")
    with pytest.raises(FileNotFoundError):
        strobe.dask.read(tmp_path / "missing", "regions")
    with pytest.raises(ValueError, match="already a dataset"):
        strobe.dask.read(mpi_dataset, "regions", start="10%")
    (tmp_path / "taken.parquet").mkdir()
    (tmp_path / "taken.parquet" / "mine.txt").write_text("x")
    with pytest.raises(ValueError, match="not a strobe Parquet dataset"):
        strobe.convert(mpi_run, tmp_path / "taken.parquet", format="parquet")
    assert (tmp_path / "taken.parquet" / "mine.txt").exists()


def test_importing_strobe_imports_no_dask():
    code = (
        "import sys, strobe, strobe.dask\n"
        "assert 'dask' not in sys.modules, 'dask imported'\n"
        "assert strobe.dask.TABLES[2] == 'regions'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_local_cluster_example(mpi_run, tmp_path):
    out_csv = tmp_path / "stats.csv"
    r = subprocess.run(
        [sys.executable, str(EXAMPLE), str(mpi_run), "--output", str(tmp_path / "job.parquet"), "--csv", str(out_csv)],
        capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    got = normalise(pd.read_csv(out_csv))
    pd.testing.assert_frame_equal(got, sql_wait_stats(mpi_run), check_exact=True)
    assert "MPI_Barrier" in r.stdout
    for rank in range(3):
        assert f"rank {rank}: " in r.stdout and "% of its run" in r.stdout
