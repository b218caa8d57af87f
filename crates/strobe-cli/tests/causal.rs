//! `strobe causal` on the ground-truth programs (tests/programs/causal_*.c),
//! whose real answer is known: a serial loop where `hot` is 60% of the
//! run, two joined threads where `long_side` is the longer one, and a
//! worker pool limited by the lock around `locked_update`. A shortened
//! schedule (three speedups, function mode, runs of a few seconds) must
//! rank the truth first with a positive effect, leave the program's
//! output as it is without strobe, and write the report's files; an
//! end-to-end run does one speedup per run. The accuracy figures come
//! from `strobe-bench causal`, not from here.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

// Causal runs measure time: they take turns (`one_at_a_time`).
use common::{databases, one_at_a_time, text};

fn build(name: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("causal-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    let exe = out.join(name);
    let status = Command::new("cc")
        .args(["-O2", "-g", "-pthread", "-o"])
        .arg(&exe)
        .arg(root.join(format!("tests/programs/{name}.c")))
        .arg(format!("-I{}", root.join("include").display()))
        .status()
        .expect("cc runs");
    assert!(status.success(), "cc {name}.c");
    exe
}

fn strobe() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_strobe"));
    // The runtime this test build made (cargo test builds it in deps/).
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_strobe"));
    let deps = exe.with_file_name("deps").join("libstrobe_runtime.so");
    if deps.is_file() {
        cmd.env("STROBE_RUNTIME", deps);
    }
    cmd.env_remove("STROBE_CONFIG");
    cmd
}

/// Runs `strobe causal` with the shortened schedule and `extra` options
/// on `exe args` (`runs` times: the variants); checks the program's
/// output against runs without strobe; returns the run directory and
/// strobe's output.
fn causal_run(exe: &Path, args: &[&str], extra: &[&str], runs: usize) -> (PathBuf, Output) {
    let plain = Command::new(exe).args(args).output().unwrap();
    assert!(plain.status.success());
    let out_dir = exe.with_extension(format!("out-{}", extra.len()));
    let _ = std::fs::remove_dir_all(&out_dir);
    let run = strobe()
        .arg("causal")
        .arg("--output-dir")
        .arg(&out_dir)
        .args(["--causal-seed", "7"])
        .args(if extra.contains(&"--causal-mode") {
            &[][..]
        } else {
            &["--causal-mode", "function"][..]
        })
        .args(extra)
        .arg("--")
        .arg(exe)
        .args(args)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "strobe causal failed: {}",
        text(&run.stderr)
    );
    assert_eq!(
        text(&run.stdout),
        text(&plain.stdout).repeat(runs),
        "the program's output changed"
    );
    (out_dir.join("latest"), run)
}

/// The report's curves as (selection, [(speedup, program speedup)]), in
/// rank order.
fn curves(run_dir: &Path) -> Vec<(String, Vec<(f64, f64)>)> {
    let out = strobe()
        .args([
            "causal",
            "report",
            "--csv",
            "--top",
            "0",
            "--no-files",
            "-i",
        ])
        .arg(run_dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut curves: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for line in text(&out.stdout).lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let (selection, speedup, effect) = (f[0], f[2].parse().unwrap(), f[3].parse().unwrap());
        match curves.iter_mut().find(|c| c.0 == selection) {
            Some(c) => c.1.push((speedup, effect)),
            None => curves.push((selection.to_string(), vec![(speedup, effect)])),
        }
    }
    curves
}

fn effect_at(curve: &[(f64, f64)], speedup: f64) -> f64 {
    curve
        .iter()
        .find(|p| (p.0 - speedup).abs() < 1e-6)
        .map_or(f64::NAN, |p| p.1)
}

/// The truth is ranked first, its effect at 50% is positive and larger
/// than every other selection's.
fn truth_first(run_dir: &Path, truth: &str) {
    let curves = curves(run_dir);
    let names: Vec<&str> = curves.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(names.first().copied(), Some(truth), "ranking: {curves:?}");
    let best = effect_at(&curves[0].1, 0.5);
    assert!(best > 0.05, "{truth} at 50%: {best} ({curves:?})");
    for (name, points) in &curves[1..] {
        let other = effect_at(points, 0.5);
        assert!(
            other.is_nan() || other < best,
            "{name} ({other}) beats {truth} ({best})"
        );
    }
}

const SHORT: &[&str] = &["--causal-speedups", "0,25,50"];

#[test]
fn serial_hot_function_is_ranked_first() {
    let _turn = one_at_a_time();
    let exe = build("causal_serial");
    let (dir, run) = causal_run(&exe, &["5000"], SHORT, 1);
    truth_first(&dir, "hot");
    let stderr = text(&run.stderr);
    assert!(stderr.contains("hot"), "the report is printed: {stderr}");
    let coz = std::fs::read_to_string(dir.join("profile.coz")).expect("profile.coz written");
    assert!(coz
        .lines()
        .any(|l| l.starts_with("experiment\tselected=hot")));
    assert!(std::fs::read_to_string(dir.join("causal.svg"))
        .unwrap()
        .contains("<svg"));
}

#[test]
fn quiet_prints_nothing_and_writes_the_files() {
    let _turn = one_at_a_time();
    let exe = build("causal_serial");
    let extra = ["-q", "--causal-speedups", "0,25,50"];
    let (dir, run) = causal_run(&exe, &["3000"], &extra, 1);
    let stderr = text(&run.stderr);
    for printed in ["causal experiments", "wrote", "hot", "Impact"] {
        assert!(!stderr.contains(printed), "-q printed {printed}: {stderr}");
    }
    let coz = std::fs::read_to_string(dir.join("profile.coz")).expect("profile.coz written");
    assert!(coz.lines().any(|l| l.starts_with("experiment\t")), "{coz}");
    assert!(std::fs::read_to_string(dir.join("causal.svg"))
        .expect("causal.svg written")
        .contains("<svg"));
}

#[test]
fn threads_longer_side_is_ranked_first() {
    let _turn = one_at_a_time();
    let exe = build("causal_threads");
    let (dir, _) = causal_run(&exe, &["600"], SHORT, 1);
    truth_first(&dir, "long_side");
}

#[test]
fn pool_locked_section_is_ranked_first() {
    let _turn = one_at_a_time();
    let exe = build("causal_pool");
    let (dir, _) = causal_run(&exe, &["4500"], SHORT, 1);
    truth_first(&dir, "locked_update");
}

#[test]
fn end_to_end_runs_once_per_speedup() {
    let _turn = one_at_a_time();
    let exe = build("causal_serial");
    let (dir, _) = causal_run(
        &exe,
        &["900"],
        &[
            "--end-to-end",
            "--causal-speedups",
            "0,25,50",
            "--causal-function-scope",
            "^hot$",
        ],
        3,
    );
    let dbs: Vec<PathBuf> = databases(&dir);
    assert_eq!(dbs.len(), 3, "one database per variant: {dbs:?}");
    let curves = curves(&dir);
    assert_eq!(curves.len(), 1, "{curves:?}");
    assert_eq!(curves[0].0, "hot");
    assert!(effect_at(&curves[0].1, 0.5) > 0.1, "{curves:?}");
}

#[test]
fn a_fixed_line_is_the_only_selection() {
    let _turn = one_at_a_time();
    let exe = build("causal_serial");
    let source = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/programs/causal_serial.c"),
    )
    .unwrap();
    let line = 1 + source
        .lines()
        .position(|l| l.contains("/* causal-truth */"))
        .unwrap();
    let fixed = format!("causal_serial.c:{line}");
    let (dir, _) = causal_run(
        &exe,
        &["4000"],
        &[
            "--causal-mode",
            "line",
            "--causal-fixed",
            &fixed,
            "--causal-speedups",
            "0,25,50",
        ],
        1,
    );
    let curves = curves(&dir);
    assert_eq!(curves.len(), 1, "{curves:?}");
    assert!(curves[0].0.ends_with(&format!("/{fixed}")), "{curves:?}");
}

#[test]
fn an_invalid_scope_stops_before_anything_runs() {
    let out = strobe()
        .args(["causal", "--causal-function-scope", "(", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let e = text(&out.stderr);
    assert!(e.contains("causal_function_scope"), "{e}");
    let out = strobe()
        .args(["causal", "--sampler", "kernel", "--", "true"])
        .output()
        .unwrap();
    assert!(text(&out.stderr).contains("in-program sampler"));
}
