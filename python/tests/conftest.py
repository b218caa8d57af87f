"""Fixtures: real profile databases made by running the strobe binary on
the test programs (tests/programs) built with cc. No mocks.

STROBE_BIN names the strobe binary (default: target/debug/strobe of the
repository); STROBE_RUNTIME, when set, the runtime library beside it."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PROGRAMS = REPO / "tests" / "programs"


def strobe_bin() -> Path:
    b = Path(os.environ.get("STROBE_BIN", "target/debug/strobe"))
    return b if b.is_absolute() else REPO / b


def run_strobe(*args, check=True) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if os.environ.get("STROBE_RUNTIME"):
        env["STROBE_RUNTIME"] = os.environ["STROBE_RUNTIME"]
    return subprocess.run(
        [str(strobe_bin()), *map(str, args)], env=env, check=check, capture_output=True, text=True
    )


def strobe_json(*args):
    return json.loads(run_strobe(*args).stdout)


@pytest.fixture(scope="session")
def programs(tmp_path_factory) -> Path:
    if not strobe_bin().exists():
        pytest.fail(f"{strobe_bin()} not found: build it (cargo build -p strobe-cli -p strobe-runtime) or set STROBE_BIN")
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        pytest.skip("no C compiler")
    out = tmp_path_factory.mktemp("programs")
    inc = REPO / "include"

    def build(*args):
        subprocess.run([cc, "-O2", "-g", *map(str, args)], check=True)

    build("-shared", "-fPIC", "-o", out / "libhotlib.so", PROGRAMS / "libhotlib.c")
    build("-o", out / "hotspots", PROGRAMS / "hotspots.c", f"-L{out}", "-lhotlib", f"-Wl,-rpath,{out}", "-lpthread")
    build(f"-I{inc}", "-o", out / "regions", PROGRAMS / "regions.c", "-lpthread")
    build(f"-I{inc}", "-o", out / "counter_regions", PROGRAMS / "counter_regions.c", "-lpthread")
    return out


def _sample(out: Path, *cmd, flags=()) -> Path:
    run_strobe("sample", "-q", "--output-dir", out, *flags, "--", *cmd)
    dbs = sorted(out.rglob("*.db"))
    assert dbs, f"strobe wrote no database under {out}"
    return dbs[0]


@pytest.fixture(scope="session")
def hot_db(programs, tmp_path_factory) -> Path:
    """hotspots: two threads, 70 % hot_a / 30 % hot_b."""
    return _sample(tmp_path_factory.mktemp("hot"), programs / "hotspots", "0.7", "0.4", "2")


@pytest.fixture(scope="session")
def regions_db(programs, tmp_path_factory) -> Path:
    """regions: nested regions, markers and thread names on two threads."""
    return _sample(tmp_path_factory.mktemp("regions"), programs / "regions")


@pytest.fixture(scope="session")
def counters_db(programs, tmp_path_factory) -> Path:
    """counter_regions with per-thread counters (-e task-clock,page-faults)."""
    return _sample(
        tmp_path_factory.mktemp("counters"),
        programs / "counter_regions", "5", "40", "2", "500",
        flags=("-e", "task-clock,page-faults"),
    )


@pytest.fixture(scope="session")
def two_dbs(hot_db, regions_db, tmp_path_factory) -> Path:
    """A directory holding two runs' databases."""
    d = tmp_path_factory.mktemp("two")
    shutil.copy(hot_db, d / "a.db")
    shutil.copy(regions_db, d / "b.db")
    return d
