//! strobe's dispatcher against Intel's under Intel's real SYCL runtime: runs
//! `scripts/sycl-check.sh` with the freshly built `libstrobe_xpti.so` (it
//! creates the oneAPI venv, dpctl, dpnp, intel-opencl-rt from PyPI, when
//! missing; the test skips, saying why, only where this machine cannot have
//! it: too little disk, or no way to PyPI). The script compares, per stream
//! and trace type, what a counting subscriber receives under each
//! dispatcher, and what Intel's own collector prints through each.

mod common;

use common::{lib_dir, repo_root};
use std::path::{Path, PathBuf};
use std::process::Command;

/// `STROBE_SYCL_VENV` (relative to the workspace root when relative), else
/// `target/sycl-venv` under the workspace root.
fn venv() -> PathBuf {
    match std::env::var_os("STROBE_SYCL_VENV") {
        Some(v) if !v.is_empty() => {
            let v = PathBuf::from(v);
            if v.is_absolute() {
                v
            } else {
                repo_root().join(v)
            }
        }
        _ => repo_root().join("target/sycl-venv"),
    }
}

#[test]
fn intel_sycl_runtime_notifies_the_same_through_strobe() {
    let venv = venv();
    let script = repo_root().join("scripts/sycl-check.sh");
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("sycl-check");
    let out = Command::new("bash")
        .arg(&script)
        // cargo's LD_LIBRARY_PATH must not take part in resolving libxptifw.so.1.
        .env_remove("LD_LIBRARY_PATH")
        .env("STROBE_SYCL_VENV", &venv)
        .env("STROBE_XPTI", lib_dir().join("libstrobe_xpti.so"))
        .env("STROBE_SYCL_WORK", &work)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(3) {
        // scripts/sycl-venv.sh: this machine cannot have the venv.
        println!("skipping: no SYCL runtime here: {stderr}");
        return;
    }
    assert!(
        out.status.success(),
        "{} failed ({}):\n{stdout}\n{stderr}",
        script.display(),
        out.status
    );
    println!("{stdout}");
}
