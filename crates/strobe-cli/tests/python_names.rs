//! Python functions named in sampled stacks: a Python program with two hot
//! functions in a 70/30 split (tests/programs/py_hot.py), run by CPython
//! ≥ 3.12 under `strobe sample`, whose perf trampolines and map strobe
//! switches on (`PYTHONPERFSUPPORT`), steps over and reads. This machine's
//! CPython is 3.11, so the test takes a newer one from PATH or builds
//! Debian's CPython 3.13 source once (kept under the target directory).

use std::path::{Path, PathBuf};
use std::process::Command;

const SOURCE: &str =
    "http://deb.debian.org/debian/pool/main/p/python3.13/python3.13_3.13.5.orig.tar.xz";
const SOURCE_SHA256: &str = "93e583f243454e6e9e4588ca2c2662206ad961659863277afcdb96801647d640";

fn sh(script: &str, dir: &Path) -> Result<(), String> {
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", script])
        .current_dir(dir)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{script}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// A CPython of version 3.12 or newer: from PATH, or built once.
fn python_with_perf_support() -> Result<PathBuf, String> {
    for name in ["python3.14", "python3.13", "python3.12"] {
        if Command::new(name)
            .arg("-c")
            .arg("1")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return Ok(PathBuf::from(name));
        }
    }
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cpython-3.13");
    let python = root.join("bin/python3.13");
    if python.is_file() {
        return Ok(python);
    }
    let build = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cpython-3.13-build");
    let _ = std::fs::remove_dir_all(&build);
    std::fs::create_dir_all(&build).map_err(|e| e.to_string())?;
    sh(
        &format!(
            "curl -sSf -o src.tar.xz {SOURCE} && echo '{SOURCE_SHA256}  src.tar.xz' | sha256sum -c --quiet"
        ),
        &build,
    )
    .map_err(|e| format!("download: {e}"))?;
    sh(
        &format!(
            "mkdir src && tar xJf src.tar.xz -C src --strip-components=1 && cd src && \
             ./configure -q --prefix={} >/dev/null && make -j\"$(nproc)\" -s >/dev/null 2>&1 && \
             make -s install >/dev/null 2>&1",
            root.display()
        ),
        &build,
    )?;
    let _ = std::fs::remove_dir_all(&build);
    Ok(python)
}

#[test]
fn a_python_programs_hot_functions_are_named_with_their_shares() {
    let python = match python_with_perf_support() {
        Ok(p) => p,
        Err(e) if e.starts_with("download") => {
            println!("skipped: no CPython >= 3.12 here and its source cannot be fetched: {e}");
            return;
        }
        Err(e) => panic!("building CPython 3.13: {e}"),
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/programs/py_hot.py");
    // Both backends step over the trampolines: the signal handler by their
    // code bytes, the collector by the perf map.
    for sampler in ["signal", "kernel"] {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_strobe"))
            .env_remove("PYTHONPERFSUPPORT")
            .args(["sample", "-q", "--sampler", sampler, "--output-dir"])
            .arg(dir.path())
            .arg("--")
            .arg(&python)
            .arg(&script)
            .arg("2")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{sampler}: {err}");
        check_shares(dir.path(), sampler);
    }
    // The map strobe caused is gone, its names kept in the database.
    let maps: Vec<_> = std::fs::read_dir("/tmp")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with("perf-")
                && name.ends_with(".map")
                && std::fs::read_to_string(e.path()).is_ok_and(|t| t.contains("py_hot.py"))
        })
        .map(|e| e.path())
        .collect();
    assert!(maps.is_empty(), "left behind: {maps:?}");
}

/// hot_a has 70% ± 5 pp of the two functions' time, and `main` (their
/// Python caller) is on the stacks.
fn check_shares(dir: &Path, sampler: &str) {
    let summary = Command::new(env!("CARGO_BIN_EXE_strobe"))
        .args([
            "summary",
            "--report",
            "functions",
            "--format",
            "json",
            "--limit",
            "0",
            "-i",
        ])
        .arg(dir)
        .output()
        .unwrap();
    assert!(summary.status.success());
    let json: serde_json::Value = serde_json::from_slice(&summary.stdout).unwrap();
    let total = |name: &str| -> f64 {
        json["functions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| {
                f["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with(&format!("py::{name}:")))
            })
            .map(|f| f["total_ns"].as_f64().unwrap())
            .sum()
    };
    let (a, b) = (total("hot_a"), total("hot_b"));
    assert!(
        a > 0.0 && b > 0.0,
        "{sampler}: hot_a {a} ns, hot_b {b} ns: {json}"
    );
    let share = a / (a + b);
    assert!(
        (share - 0.7).abs() <= 0.05,
        "{sampler}: hot_a has {:.1}% of the two functions' time (the program spent 70%)",
        share * 100.0
    );
    assert!(
        total("main") >= 0.9 * (a + b),
        "{sampler}: main {}",
        total("main")
    );
}
