//! strobe's dispatcher against Intel's under Intel's real SYCL runtime: runs
//! `scripts/sycl-check.sh` with the freshly built `libstrobe_xpti.so` (it
//! creates the oneAPI venv, dpctl, dpnp, intel-opencl-rt from PyPI, when
//! missing; the test skips, saying why, only where this machine cannot have
//! it: too little disk, or no way to PyPI). The script compares, per stream and trace type, what a counting
//! subscriber receives under each dispatcher, and what Intel's own collector
//! prints through each.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The directory holding the cdylib built with this test (target/<profile>/deps
/// or target/<profile>), found as `tests/c_abi.rs` finds it.
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let deps = exe.parent().expect("deps dir").to_path_buf();
    for d in [
        deps.clone(),
        deps.parent().expect("profile dir").to_path_buf(),
    ] {
        if d.join("libstrobe_xpti.so").exists() {
            return d;
        }
    }
    panic!(
        "libstrobe_xpti.so not found next to {}: build it with `cargo build -p strobe-xpti`",
        exe.display()
    );
}

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
