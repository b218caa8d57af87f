//! The Python package (python/, crates/strobe-py): builds it with maturin
//! into a virtual environment this test creates (pip installs maturin,
//! pandas, pyarrow, polars, pytest, and for the Parquet tests DuckDB, Dask
//! and distributed, from PyPI the first time or when the list changes; the
//! environment is kept under the target directory), then runs its pytest
//! suite (python/tests) against this build's `strobe` and runtime, with
//! the databases of a small MPI job (tests/mpi_fixture) for it to read.

mod common;
#[path = "mpi_fixture/mod.rs"]
mod mpi_fixture;

use std::path::PathBuf;
use std::process::Command;

use common::{fresh_runtime, repo};

/// What pip installs into the environment (versions pinned where a
/// test compares results across libraries).
const PACKAGES: &[&str] = &[
    "maturin>=1.5,<2",
    "pandas",
    "pyarrow",
    "polars",
    "pytest",
    "duckdb==2.0.1",
    "dask[dataframe]==2026.8.0",
    "distributed==2026.8.0",
];

/// Runs `cmd`; its output is shown when it fails.
fn check(cmd: &mut Command, what: &str) -> Result<(), String> {
    let out = cmd
        .output()
        .map_err(|e| format!("{what}: cannot start: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what}: {}\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The virtual environment with the package's build and test needs.
fn venv() -> Result<PathBuf, String> {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("python-venv");
    let python = dir.join("bin/python");
    // The marker holds the package list it was made with: a new list
    // installs into the same environment.
    let ready = dir.join(".strobe-ready");
    let wanted = PACKAGES.join("\n");
    if std::fs::read_to_string(&ready).ok().as_deref() != Some(wanted.as_str()) {
        if !python.is_file() {
            let _ = std::fs::remove_dir_all(&dir);
            check(
                Command::new("python3").args(["-m", "venv"]).arg(&dir),
                "python3 -m venv",
            )?;
        }
        check(
            Command::new(&python)
                .args(["-m", "pip", "install", "-q"])
                .args(PACKAGES),
            "pip install (PyPI must be reachable)",
        )?;
        std::fs::write(&ready, wanted.as_bytes()).map_err(|e| e.to_string())?;
    }
    Ok(dir)
}

#[test]
fn the_python_packages_pytest_suite_passes() {
    let dir = match venv() {
        Ok(d) => d,
        Err(e) if e.starts_with("pip install") || e.starts_with("python3 -m venv") => {
            // The only thing that may stop this test: no Python packages
            // can be fetched here.
            println!("skipped: cannot set up the Python environment: {e}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let python = dir.join("bin/python");
    // Build the extension and install the package, as `pip install
    // ./python` does, but incrementally (debug build, the workspace's
    // target directory).
    check(
        Command::new(dir.join("bin/maturin"))
            .args(["develop", "-q"])
            .current_dir(repo().join("python"))
            .env("VIRTUAL_ENV", &dir)
            .env("CARGO_TARGET_DIR", repo().join("target")),
        "maturin develop",
    )
    .unwrap();
    let mpi = tempfile::tempdir().unwrap();
    mpi_fixture::write_job(mpi.path());
    let out = Command::new(&python)
        .args([
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "python/tests",
        ])
        .current_dir(repo())
        .env("STROBE_BIN", env!("CARGO_BIN_EXE_strobe"))
        .env("STROBE_RUNTIME", fresh_runtime())
        .env("STROBE_TEST_MPI_RUN", mpi.path())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    assert!(out.status.success(), "pytest failed:\n{text}");
    assert!(text.contains(" passed"), "{text}");
}
