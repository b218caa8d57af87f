//! Exports opened by the viewers they name: the Chrome JSON of a real run,
//! loaded into speedscope in a headless Chromium
//! (`scripts/speedscope-load.py`), shows each sampled thread's CPU profile
//! with the time strobe's own summary gives that thread.

mod common;

use common::{apt_get_install, build_program, databases, run_bounded, stderr, strobe_command};
use std::process::Command;
use std::time::Duration;

/// A time as speedscope prints it ("20.46ms", "1.02s", "950.00µs"), in ms.
fn speedscope_ms(text: &str) -> Option<f64> {
    let (number, scale) = if let Some(n) = text.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix("µs") {
        (n, 1e-3)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1e3)
    } else {
        return None;
    };
    number.parse::<f64>().ok().map(|v| v * scale)
}

fn headless_chromium() -> bool {
    ["chromium-headless-shell", "chromium", "chromium-browser"]
        .iter()
        .any(|b| {
            Command::new("which")
                .arg(b)
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

#[test]
fn chrome_json_of_a_real_run_loads_in_speedscope() {
    if !headless_chromium() && !apt_get_install(&["chromium-headless-shell"]) {
        eprintln!(
            "skipped: no headless Chromium, and apt-get could not install \
             chromium-headless-shell (not root, or no package mirror)"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let program = build_program(dir.path(), "regions");
    let out = dir.path().join("out");
    let mut cmd = strobe_command();
    cmd.args(["sample", "-q", "--output-dir"])
        .arg(&out)
        .arg("--")
        .arg(&program);
    let run = run_bounded(cmd, Duration::from_secs(120));
    assert!(run.status.success(), "{}", stderr(&run));
    let dbs = databases(&out);
    assert_eq!(dbs.len(), 1, "{dbs:?}");
    let mut cmd = strobe_command();
    cmd.args(["convert", "-f", "json", "-o", "run", "-i"])
        .arg(&dbs[0])
        .arg("-d")
        .arg(dir.path());
    let conv = run_bounded(cmd, Duration::from_secs(120));
    assert!(conv.status.success(), "{}", stderr(&conv));

    let repo = common::repo();
    let mut cmd = Command::new("python3");
    cmd.arg(repo.join("scripts/speedscope-load.py"))
        .arg(dir.path().join("run.trace.json"))
        .arg(repo.join("target/viewers"));
    let load = run_bounded(cmd, Duration::from_secs(400));
    if load.status.code() == Some(2) {
        eprintln!("skipped: {}", stderr(&load).trim());
        return;
    }
    assert!(load.status.success(), "{}", stderr(&load));
    let seen: serde_json::Value = serde_json::from_slice(&load.stdout).unwrap();
    let console: Vec<&str> = seen["console"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l.as_str())
        .collect();
    assert_eq!(
        seen["title"], "run.trace.json - speedscope",
        "speedscope did not import the file; console: {console:#?}"
    );
    assert!(
        console
            .iter()
            .any(|l| l.contains("Importing as Chrome Timeline")),
        "imported as something else than Chrome's CPU profiles: {console:#?}"
    );
    // Every sampled thread is a profile of its own, named after the thread,
    // whose total is the thread's sampled CPU time.
    let text: Vec<&str> = seen["text"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l.as_str())
        .collect();
    let threads = common::summary_csv(&dbs[0], "threads");
    let sampled: Vec<_> = threads
        .iter()
        .filter(|t| t["Samples"].parse::<u64>().unwrap() > 0)
        .collect();
    assert_eq!(sampled.len(), 2, "{threads:?}");
    for t in sampled {
        let label = format!("run.trace.json - {}", t["Name"]);
        let at = text
            .iter()
            .position(|l| *l == label)
            .unwrap_or_else(|| panic!("no profile {label:?} in speedscope: {text:?}"));
        let shown = text[at + 1..]
            .iter()
            .find_map(|l| speedscope_ms(l))
            .unwrap_or_else(|| panic!("no time after {label:?}: {text:?}"));
        let strobe_ms: f64 = t["Sampled (ms)"].parse().unwrap();
        assert!(
            shown >= strobe_ms * 0.8 && shown <= strobe_ms * 1.5 + 1.0,
            "{label}: speedscope shows {shown} ms, strobe summary {strobe_ms} ms"
        );
    }
}
