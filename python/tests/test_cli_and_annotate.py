"""``python -m strobe`` against the ``strobe`` binary, and the annotations
(``region``, ``traced``, ``mark``, ``set_thread_name``, progress points) with
and without ``strobe sample``/``strobe causal`` — on real runs of real
programs."""

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import strobe

REPO = Path(__file__).resolve().parents[2]


def strobe_bin():
    return os.environ.get("STROBE_BIN", str(REPO / "target" / "debug" / "strobe"))


def strobe_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith("STROBE_")}
    if "STROBE_RUNTIME" in os.environ:
        env["STROBE_RUNTIME"] = os.environ["STROBE_RUNTIME"]
    return env


def run(args, **kw):
    return subprocess.run(args, capture_output=True, env=strobe_env(), timeout=120, **kw)


@pytest.fixture(scope="module")
def annotated_run(tmp_path_factory):
    """A Python program using every annotation, run under strobe sample."""
    tmp = tmp_path_factory.mktemp("annotated")
    script = tmp / "annotated.py"
    script.write_text(
        textwrap.dedent(
            """
            import threading, strobe
            print("active", strobe.is_active())

            @strobe.traced
            def step(i):
                return sum(range(1000 + i))

            @strobe.traced(name="load data")
            def load():
                return [step(i) for i in range(5)]

            def worker():
                strobe.set_thread_name("py-worker")
                with strobe.region("in worker"):
                    step(1)

            with strobe.region("outer"):
                load()
                strobe.mark("epoch 3")
                with strobe.region("inner"):
                    pass
            t = threading.Thread(target=worker)
            t.start(); t.join()
            print("done")
            """
        )
    )
    out = tmp / "out"
    r = run([strobe_bin(), "sample", "-q", "--output-dir", str(out), "--", sys.executable, str(script)])
    assert r.returncode == 0, r.stderr.decode()
    plain = run([sys.executable, str(script)])
    dbs = sorted(out.rglob("*.db"))
    assert len(dbs) == 1, dbs
    return {"db": dbs[0], "out": out, "stdout": r.stdout, "plain": plain}


def test_without_strobe_annotations_do_nothing_and_traced_returns_the_function():
    assert strobe.is_active() is False

    def f(x):
        return x + 1

    assert strobe.traced(f) is f
    assert strobe.traced(name="x")(f) is f
    with strobe.region("nothing") as r:
        assert r is not None
    assert strobe.region("a") is strobe.region("b"), "one shared no-op object"
    strobe.mark("m")
    strobe.set_thread_name("t")
    strobe.progress("p")
    strobe.progress_begin("q")
    strobe.progress_end("q")


def test_a_name_with_a_nul_is_a_value_error_under_strobe_only_when_recorded(tmp_path):
    script = tmp_path / "nul.py"
    script.write_text(
        "import strobe\ntry:\n    strobe.region('a\\0b')\nexcept ValueError as e:\n    print('ValueError', e)\n"
    )
    r = run([strobe_bin(), "sample", "-q", "--output-dir", str(tmp_path / "o"), "--", sys.executable, str(script)])
    assert r.returncode == 0, r.stderr.decode()
    assert b"ValueError a strobe name must not contain a NUL" in r.stdout


def test_progress_points_are_counted_under_strobe_causal(tmp_path):
    script = tmp_path / "progress.py"
    script.write_text(
        textwrap.dedent(
            """\
            import time
            import strobe
            end = time.monotonic() + 2.5
            while time.monotonic() < end:
                strobe.progress_begin("request")
                sum(range(3000))
                strobe.progress_end("request")
                strobe.progress("batch")
            print("done")
            """
        )
    )
    out = tmp_path / "o"
    # The interpreter's code (its executable or libpython) is the scope.
    scope = ["--causal-binary-scope", "python"]
    r = run([strobe_bin(), "causal", "-q", *scope, "--output-dir", str(out), "--", sys.executable, str(script)])
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout == b"done\n"
    dbs = sorted(out.rglob("*.db"))
    assert len(dbs) == 1, dbs
    con = sqlite3.connect(dbs[0])
    kinds = dict(
        con.execute(
            "SELECT name || '/' || kind, sum(visits) FROM strobe_causal_progress GROUP BY name, kind"
        ).fetchall()
    )
    assert kinds.get("batch/throughput", 0) > 100, kinds
    assert kinds.get("request/latency", 0) > 100, kinds
    # python -m strobe offers the report (it only reads files) as the binary does.
    report = ["causal", "report", "--csv", "--top", "0", "--no-files", "-i", str(out)]
    ours = run([sys.executable, "-m", "strobe", *report])
    theirs = run([strobe_bin(), *report])
    assert ours.returncode == theirs.returncode == 0, ours.stderr.decode()
    assert ours.stdout == theirs.stdout
    assert ours.stdout.startswith(b"selection,progress,speedup,"), ours.stdout


def test_annotations_are_recorded_under_strobe_sample(annotated_run):
    assert annotated_run["stdout"] == annotated_run["plain"].stdout.replace(b"active False", b"active True")
    con = sqlite3.connect(annotated_run["db"])
    regions = dict(con.execute("SELECT name, count(*) FROM regions GROUP BY name").fetchall())
    assert regions.get("outer") == 1, regions
    assert regions.get("inner") == 1, regions
    assert regions.get("load data") == 1, regions
    assert regions.get("step") == 6, regions
    assert regions.get("in worker") == 1, regions
    # Nesting: load data lies inside outer.
    (o_start, o_end), = con.execute("SELECT start, end FROM regions WHERE name='outer'").fetchall()
    (l_start, l_end), = con.execute("SELECT start, end FROM regions WHERE name='load data'").fetchall()
    assert o_start <= l_start <= l_end <= o_end
    names = [n for (n,) in con.execute("SELECT name FROM threads")]
    assert "py-worker" in names, names
    text = json.dumps(con.execute("SELECT * FROM rocpd_string").fetchall())
    assert "epoch 3" in text


def test_python_m_strobe_prints_what_the_binary_prints(annotated_run):
    db = str(annotated_run["db"])
    for args in (
        ["query", "-i", db, "SELECT name, count(*) FROM regions GROUP BY name ORDER BY name"],
        ["summary", "-i", db, "--format", "json"],
        ["query", "--help"],
    ):
        ours = run([sys.executable, "-m", "strobe", *args])
        theirs = run([strobe_bin(), *args])
        assert ours.returncode == theirs.returncode == 0, ours.stderr.decode()
        assert ours.stdout == theirs.stdout, args
        assert ours.stderr == theirs.stderr, args


def test_python_m_strobe_errors_as_the_binary_does(tmp_path):
    missing = str(tmp_path / "missing.db")
    ours = run([sys.executable, "-m", "strobe", "query", "-i", missing, "SELECT 1"])
    theirs = run([strobe_bin(), "query", "-i", missing, "SELECT 1"])
    assert ours.returncode == theirs.returncode != 0
    assert ours.stderr == theirs.stderr
    bad = run([sys.executable, "-m", "strobe", "no-such-command"])
    assert bad.returncode == 2 and b"unrecognized subcommand" in bad.stderr
    sample = run([sys.executable, "-m", "strobe", "sample", "--", "true"])
    assert sample.returncode == 2
    assert b"use the `strobe` binary" in sample.stderr


def test_strobe_cli_returns_the_status_without_exiting(annotated_run, capfd):
    code = strobe.cli(["query", "-i", str(annotated_run["db"]), "SELECT 40 + 2"])
    assert code == 0
    assert "42" in capfd.readouterr().out
    assert strobe.cli(["query", "--no-such-flag"]) == 2
