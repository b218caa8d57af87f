"""strobe.export: convert, merge, summary and the streaming writer, against
real databases and the strobe command line's own outputs."""

import gzip
import json
import sqlite3

import pandas as pd
import pytest

from strobe import _profile as sp
from strobe import export
from conftest import run_strobe

FORMATS = ["pftrace", "json", "folded", "svg", "pprof", "firefox"]
EXT = {"pftrace": ".pftrace", "json": ".trace.json", "folded": ".folded", "svg": ".svg", "pprof": ".pb.gz", "firefox": ".firefox.json"}


@pytest.mark.parametrize("fmt", FORMATS)
def test_convert_every_format(regions_db, tmp_path, fmt):
    # Named as strobe convert names its output (the SVG title holds the stem).
    out = tmp_path / "py" / f"cli{EXT[fmt]}"
    what = export.convert(str(regions_db), out, format=fmt)
    assert out.stat().st_size > 0 and what
    if fmt in ("json", "firefox"):
        json.loads(out.read_text())
    if fmt == "pprof":
        assert len(gzip.decompress(out.read_bytes())) > 0
    # The same output as strobe convert where it is deterministic.
    if fmt in ("folded", "json", "pftrace"):
        run_strobe("convert", "-i", regions_db, "-f", fmt, "-o", "cli", "-d", tmp_path)
        assert out.read_bytes() == (tmp_path / f"cli{EXT[fmt]}").read_bytes()


def test_convert_format_from_extension_and_csv(hot_db, tmp_path):
    export.convert(hot_db, tmp_path / "x.folded")
    assert "hot_a" in (tmp_path / "x.folded").read_text()
    export.convert(hot_db, tmp_path / "t.csv", format="csv")
    assert list(tmp_path.glob("t_*.csv"))


def test_convert_window_matches_cli(hot_db, tmp_path):
    export.convert(hot_db, tmp_path / "w.folded", start="50%")
    run_strobe("convert", "-i", hot_db, "-f", "folded", "--start", "50%", "-o", "cli", "-d", tmp_path)
    assert (tmp_path / "w.folded").read_text() == (tmp_path / "cli.folded").read_text()


def test_convert_errors(hot_db, tmp_path):
    with pytest.raises(ValueError, match="unknown"):
        export.convert(hot_db, tmp_path / "x.out", format="excel")
    with pytest.raises(ValueError, match="cannot tell the format"):
        export.convert(hot_db, tmp_path / "x.out")
    with pytest.raises(FileNotFoundError):
        export.convert(tmp_path / "missing.db", tmp_path / "x.folded")
    with pytest.raises(ValueError, match="unknown"):
        export.writer(tmp_path / "x.out", format="excel")


def test_merge_and_summary(two_dbs, tmp_path, hot_db):
    stats = export.merge(str(two_dbs), tmp_path / "m.db")
    assert stats["inputs"] == 2 and stats["processes"] == 2
    merged = sp.open(tmp_path / "m.db")
    assert len(merged.samples()) == len(sp.open(two_dbs).samples())
    with pytest.raises(Exception):
        export.merge(str(two_dbs), tmp_path / "m.db")  # exists already
    s = export.summary(hot_db)
    assert "hot_a" in set(s.functions["name"].astype(str))


def test_writer_profile_equals_convert(regions_db, tmp_path):
    with export.writer(tmp_path / "w.folded") as w:
        w.write(sp.open(regions_db))
    run_strobe("convert", "-i", regions_db, "-f", "folded", "-o", "cli", "-d", tmp_path)
    assert (tmp_path / "w.folded").read_text() == (tmp_path / "cli.folded").read_text()


def test_writer_sample_chunks_fold_like_convert(hot_db, tmp_path):
    p = sp.open(hot_db)
    with export.writer(tmp_path / "chunks.folded", format="folded") as w:
        for chunk in p.samples(stack=True, chunks=50):
            w.write(chunk)
    run_strobe("convert", "-i", hot_db, "-f", "folded", "-o", "cli", "-d", tmp_path)
    assert (tmp_path / "chunks.folded").read_text() == (tmp_path / "cli.folded").read_text()


@pytest.mark.parametrize("fmt", FORMATS)
def test_writer_regions_and_samples_every_format(regions_db, tmp_path, fmt):
    p = sp.open(regions_db)
    out = tmp_path / f"r{EXT[fmt]}"
    with export.writer(out, format=fmt) as w:
        for chunk in p.regions(chunks=4):
            w.write(chunk)
        w.write(p.samples(stack=True, as_="arrow"))
    assert out.stat().st_size > 0
    if fmt == "json":
        events = json.loads(out.read_text())
        events = events["traceEvents"] if isinstance(events, dict) else events
        names = {e.get("name") for e in events}
        assert set(p.regions()["name"].astype(str)) <= names


def test_writer_bad_chunks(tmp_path, hot_db):
    w = export.writer(tmp_path / "x.folded")
    with pytest.raises(ValueError, match="columns"):
        w.write(pd.DataFrame({"a": [1]}))
    with pytest.raises(TypeError):
        w.write(42)
    with pytest.raises(ValueError, match="nothing was written"):
        w.close()
    # An exception inside the with block leaves no output.
    with pytest.raises(RuntimeError):
        with export.writer(tmp_path / "y.folded") as w:
            w.write(sp.open(hot_db))
            raise RuntimeError("stop")
    assert not (tmp_path / "y.folded").exists()
