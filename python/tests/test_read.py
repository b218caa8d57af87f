"""strobe.open and the Profile tables, against real databases."""

import re
import sqlite3

import numpy as np
import pandas as pd
import pytest

from strobe import _profile as sp
from conftest import run_strobe, strobe_json


def test_samples_count_and_order(hot_db):
    p = sp.open(str(hot_db))
    s = p.samples()
    n = sqlite3.connect(hot_db).execute("SELECT count(*) FROM rocpd_sample").fetchone()[0]
    assert len(s) == n > 50
    assert list(s.columns) == [
        "timestamp", "pid", "tid", "guid", "kind", "weight_ns", "stack_id", "function", "module",
    ]
    assert s["timestamp"].is_monotonic_increasing
    assert s["timestamp"].dtype == np.int64
    assert isinstance(s["function"].dtype, pd.CategoricalDtype)
    assert {"hot_a", "hot_b"} <= set(s["function"].dropna())
    assert s["module"].dropna().str.endswith("libhotlib.so").any()
    # The same rows as the strobe_samples view.
    view = p.query("SELECT timestamp, tid, weight_ns, stack_id FROM strobe_samples ORDER BY timestamp, id")
    assert view["timestamp"].tolist() == s["timestamp"].tolist()
    assert view["weight_ns"].tolist() == s["weight_ns"].tolist()
    assert view["stack_id"].tolist() == s["stack_id"].tolist()


def test_sample_stacks(hot_db):
    s = sp.open(hot_db).samples(stack=True)
    leaf = s["stack"].map(lambda t: t[0]).astype(str)
    assert (leaf == s["function"].astype(str)).all()
    assert s["stack"].map(lambda t: "split_work" in t).mean() > 0.9
    st = sp.open(hot_db).stacks()
    assert {"guid", "stack_id", "depth", "function", "module"} <= set(st.columns)


def test_functions_match_strobe_summary(hot_db):
    ours = sp.open(hot_db).functions()
    theirs = pd.DataFrame(strobe_json("summary", "-i", hot_db, "--format", "json", "--report", "functions")["functions"])
    cols = ["name", "self_samples", "self_ns", "total_samples", "total_ns"]
    a = ours[cols].astype({"name": str}).sort_values(cols).reset_index(drop=True)
    b = theirs[cols].sort_values(cols).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b, check_dtype=False)
    assert np.allclose(ours["self_pct"].sort_values().values, theirs["self_pct"].sort_values().values)


def test_regions_threads_processes(regions_db):
    p = sp.open(regions_db)
    r = p.regions()
    n = sqlite3.connect(regions_db).execute("SELECT count(*) FROM rocpd_region").fetchone()[0]
    assert len(r) == n > 0
    assert (r["end"] >= r["start"]).all()
    assert r["start"].is_monotonic_increasing
    cli = strobe_json("query", "-i", regions_db, "--format", "json", "SELECT name, count(*) n FROM regions GROUP BY name ORDER BY name")
    ours = r.groupby("name", observed=True).size()
    assert {c["name"]: c["n"] for c in cli} == {str(k): int(v) for k, v in ours.items()}
    t = p.threads()
    assert len(t) >= 2 and t["tid"].dtype == np.int64
    pr = p.processes()
    assert len(pr) == 1 and int(pr["pid"][0]) == int(r["pid"][0])


def test_counters(counters_db):
    c = sp.open(counters_db).counters()
    assert len(c) > 0
    assert {"task-clock", "page-faults"} <= set(c["name"].astype(str))
    assert c["value"].dtype == np.float64


def test_query_types(regions_db):
    q = sp.open(regions_db).query("SELECT 1 AS i, 2.5 AS f, 'x' AS s, NULL AS n, CASE WHEN 1 THEN NULL ELSE 3 END AS ni")
    assert q["i"][0] == 1 and q["f"][0] == 2.5 and q["s"][0] == "x"
    assert len(q) == 1


def test_many_inputs_as_one(two_dbs, hot_db, regions_db):
    p = sp.open(str(two_dbs))
    assert len(p.files) == 2
    n = sum(sqlite3.connect(f).execute("SELECT count(*) FROM rocpd_sample").fetchone()[0] for f in (hot_db, regions_db))
    s = p.samples()
    assert len(s) == n
    assert s["guid"].nunique() == 2
    assert s["timestamp"].is_monotonic_increasing
    # globs and lists read the same.
    assert len(sp.open([str(two_dbs / "a.db"), str(two_dbs / "b.db")]).samples()) == n
    assert len(sp.open(str(two_dbs / "*.db")).samples()) == n


@pytest.mark.parametrize("table", ["samples", "regions", "threads", "counters", "query"])
def test_chunks_concatenate(two_dbs, counters_db, table):
    p = sp.open([str(two_dbs), str(counters_db)])
    call = (lambda **k: p.query("SELECT * FROM regions ORDER BY start, id", **k)) if table == "query" else getattr(p, table)
    whole = call()
    chunks = list(call(chunks=7))
    assert all(len(c) <= 7 for c in chunks)
    cat = pd.concat(chunks, ignore_index=True)
    assert len(cat) == len(whole)
    def values(s):
        return [None if pd.isna(v) else v for v in s.astype(object).tolist()]

    for col in whole.columns:
        assert values(cat[col]) == values(whole[col]), col


def test_window(hot_db):
    p = sp.open(hot_db)
    half = sp.open(hot_db, start="50%")
    full = len(p.samples())
    assert 0 < len(half.samples()) < full
    cli = strobe_json("query", "-i", hot_db, "--start", "50%", "--format", "json", "SELECT count(*) n FROM samples")
    assert len(half.samples()) == cli[0]["n"]
    assert len(half.samples(chunks=10 ** 6).__next__()) == cli[0]["n"]


def test_arrow_and_polars(hot_db):
    pa = pytest.importorskip("pyarrow")
    p = sp.open(hot_db)
    t = p.samples(as_="arrow", stack=True)
    assert isinstance(t, pa.Table) and t.num_rows == len(p.samples())
    assert pa.types.is_dictionary(t.schema.field("function").type)
    chunks = list(p.regions(as_="arrow", chunks=3))
    assert all(isinstance(c, pa.Table) for c in chunks)
    pl = pytest.importorskip("polars")
    d = p.samples(as_="polars")
    assert isinstance(d, pl.DataFrame) and d.height == t.num_rows


def test_summary_flamegraph_html(hot_db, tmp_path):
    p = sp.open(hot_db)
    s = p.summary()
    assert set(s.tables()) == {"regions", "functions", "threads"}
    assert "<table" in s._repr_html_()
    cli = strobe_json("summary", "-i", hot_db, "--format", "json", "--report", "threads")["threads"]
    assert sorted(s.threads["samples"].tolist()) == sorted(t["samples"] for t in cli)
    fg = p.flamegraph(title="strobe: cli")
    assert fg._repr_svg_().lstrip().startswith("<?xml") and "hot_a" in fg.svg
    fg.save(tmp_path / "f.svg")
    run_strobe("convert", "-i", hot_db, "-f", "svg", "-o", "cli", "-d", tmp_path)
    # Frame colours vary from run to run; titles (name, time, share) do not.
    titles = lambda t: sorted(re.findall(r"<title>([^<]*)</title>", t))  # noqa: E731
    assert titles((tmp_path / "f.svg").read_text()) == titles((tmp_path / "cli.svg").read_text())
    h = p._repr_html_()
    assert "samples" in h and str(hot_db) in h


def test_errors(tmp_path, hot_db):
    with pytest.raises(FileNotFoundError, match="no such file"):
        sp.open(tmp_path / "missing.db")
    bad = tmp_path / "bad.db"
    bad.write_text("hello")
    with pytest.raises(ValueError, match="not an SQLite database"):
        sp.open(bad)
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(ValueError, match="not a strobe/rocpd profile"):
        sp.open(empty)
    with pytest.raises(ValueError, match="invalid time bound"):
        sp.open(hot_db, start="soon")
    cli = run_strobe("query", "-i", hot_db, "--start", "soon", "SELECT 1", check=False)
    assert "invalid time bound `soon`" in cli.stderr
    with pytest.raises(ValueError, match="no database file matches"):
        sp.open(str(tmp_path / "*.nothing"))
    with pytest.raises(ValueError, match="SQL error"):
        sp.open(hot_db).query("SELECT nope FROM nothing")
    with pytest.raises(ValueError, match="SQL error"):
        list(sp.open(hot_db).query("SELECT nope FROM nothing", chunks=5))
    with pytest.raises(ValueError, match="as_"):
        sp.open(hot_db).samples(as_="excel")
