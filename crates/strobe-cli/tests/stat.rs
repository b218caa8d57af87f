//! `strobe stat` on real programs: counts against what the program
//! measures of itself, perf stat's layout, intervals, formats, groups and
//! passes, derived metrics, exit status and output passed through.

mod common;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::OnceLock;

use common::{clean_command, programs_dir, text};

/// tests/programs/touch_pages.c, built once.
fn touch_pages() -> PathBuf {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        let exe = dir.join(format!("touch_pages-{}", std::process::id()));
        let src = programs_dir().join("touch_pages.c");
        let ok = Command::new("cc")
            .args(["-O2", "-pthread", "-o"])
            .arg(&exe)
            .arg(src)
            .status()
            .unwrap()
            .success();
        assert!(ok, "cc touch_pages.c");
        exe
    })
    .clone()
}

fn strobe(args: &[&str], env: &[(&str, &str)]) -> Output {
    clean_command(env!("CARGO_BIN_EXE_strobe"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// `cpu_ns=N pages=P` as the program printed it.
fn self_measured(stdout: &[u8]) -> (f64, u64) {
    let out = text(stdout);
    let field = |k: &str| {
        out.split_whitespace()
            .find_map(|w| w.strip_prefix(k))
            .unwrap_or_else(|| panic!("{k} in {out}"))
            .to_string()
    };
    (
        field("cpu_ns=").parse().unwrap(),
        field("pages=").parse().unwrap(),
    )
}

/// CSV lines of `--format csv` (perf stat -x, columns): event → (value,
/// running %).
fn csv_counts(csv: &str) -> Vec<(String, String, f64)> {
    csv.lines()
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (
                f[2].to_string(),
                f[0].to_string(),
                f[4].parse().unwrap_or(0.0),
            )
        })
        .collect()
}

fn value(counts: &[(String, String, f64)], event: &str) -> f64 {
    let (_, v, _) = counts
        .iter()
        .find(|(e, _, _)| e == event)
        .unwrap_or_else(|| panic!("{event} in {counts:?}"));
    v.parse().unwrap_or_else(|_| panic!("{event} = {v}"))
}

#[test]
fn software_counts_match_what_the_program_measures_of_itself() {
    let exe = touch_pages();
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("stat.csv");
    let out = strobe(
        &[
            "stat",
            "-e",
            "task-clock,page-faults,context-switches",
            "--format",
            "csv",
            "-o",
            report.to_str().unwrap(),
            "--",
            exe.to_str().unwrap(),
            "3000",
            "300",
            "2",
            "7",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(7), "{}", text(&out.stderr));
    let (cpu_ns, pages) = self_measured(&out.stdout);
    let counts = csv_counts(&std::fs::read_to_string(&report).unwrap());
    let task_clock_ms = value(&counts, "task-clock");
    let share = task_clock_ms * 1e6 / cpu_ns;
    assert!(
        (share - 1.0).abs() < 0.05,
        "task-clock {task_clock_ms} ms, the program's own {} ms",
        cpu_ns / 1e6
    );
    let faults = value(&counts, "page-faults");
    assert!(
        faults >= pages as f64,
        "{faults} faults for {pages} pages touched"
    );
    assert!(
        faults < pages as f64 + 2000.0,
        "{faults} faults for {pages} pages"
    );
    // Counted: a number (`value` refuses a missing row and `<not supported>`).
    value(&counts, "context-switches");
    // Nothing of strobe's on the program's output.
    assert_eq!(text(&out.stdout).lines().count(), 1);
}

#[test]
fn the_default_report_is_laid_out_as_perf_stat_lays_it_out() {
    let exe = touch_pages();
    let out = strobe(&["stat", "--", exe.to_str().unwrap(), "100", "50"], &[]);
    assert_eq!(out.status.code(), Some(0));
    let err = text(&out.stderr);
    let quoted = format!(" Performance counter stats for '{} 100 50':", exe.display());
    assert!(err.contains(&quoted), "{err}");
    for event in [
        "task-clock",
        "context-switches",
        "cpu-migrations",
        "page-faults",
        "cycles",
        "instructions",
        "branches",
        "branch-misses",
    ] {
        let line = err
            .lines()
            .find(|l| l.split_whitespace().any(|w| w == event))
            .unwrap_or_else(|| panic!("{event} in {err}"));
        // A count, or perf's mark for what this machine cannot count.
        let first = line.split_whitespace().next().unwrap();
        assert!(
            first.parse::<f64>().is_ok() || line.contains("<not supported>"),
            "{line}"
        );
    }
    assert!(err.contains(" msec task-clock "), "{err}");
    assert!(err.contains("CPUs utilized"), "{err}");
    assert!(err.contains(" seconds time elapsed"), "{err}");
    assert!(err.contains(" seconds user"), "{err}");
}

#[test]
fn interval_mode_prints_each_intervals_counts() {
    let exe = touch_pages();
    let out = strobe(
        &[
            "stat",
            "-I",
            "100",
            "-e",
            "task-clock",
            "--",
            exe.to_str().unwrap(),
            "1",
            "450",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0));
    let err = text(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("task-clock")).collect();
    assert!(lines.len() >= 3, "{err}");
    let mut last = 0.0;
    for l in &lines {
        let t: f64 = l.split_whitespace().next().unwrap().parse().unwrap();
        assert!(t > last, "{err}");
        let ms: f64 = l.split_whitespace().nth(1).unwrap().parse().unwrap();
        // An interval holds at most its length of one thread's CPU (100 ms
        // asked; longer when the reader wakes late on a loaded machine).
        let length_ms = (t - last) * 1000.0;
        assert!(
            ms <= length_ms * 1.02 + 1.0,
            "{ms} ms in {length_ms} ms: {err}"
        );
        last = t;
    }
    assert!(err.starts_with("#           time             counts unit events"));
}

#[test]
fn json_lines_carry_perfs_fields() {
    let exe = touch_pages();
    let out = strobe(
        &[
            "stat",
            "-e",
            "task-clock,page-faults",
            "--format",
            "json",
            "--",
            exe.to_str().unwrap(),
            "500",
            "20",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0));
    let err = text(&out.stderr);
    let objects: Vec<serde_json::Value> = err
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(objects.len(), 2, "{err}");
    assert_eq!(objects[0]["event"], "task-clock");
    assert_eq!(objects[0]["unit"], "msec");
    assert_eq!(objects[0]["pcnt-running"], 100.0);
    let faults: f64 = objects[1]["counter-value"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(faults >= 500.0, "{err}");
}

#[test]
fn exit_status_signals_and_output_are_the_programs() {
    let out = strobe(&["stat", "--", "sh", "-c", "kill -TERM $$"], &[]);
    assert_eq!(out.status.code(), Some(128 + libc::SIGTERM));
    let out = strobe(&["stat", "--", "no-such-command-strobe"], &[]);
    assert_eq!(out.status.code(), Some(127));
    assert!(text(&out.stderr).contains("command not found"));
    // A program we did not write, byte for byte.
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "strobe stat\n".repeat(20_000)).unwrap();
    let plain = Command::new("xz").args(["-c", "-T1"]).arg(&input).output();
    let Ok(plain) = plain else {
        eprintln!("skipped the xz comparison: xz is not installed");
        return;
    };
    let counted = strobe(
        &[
            "stat",
            "-e",
            "task-clock",
            "--",
            "xz",
            "-c",
            "-T1",
            input.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(counted.status.code(), plain.status.code());
    assert_eq!(counted.stdout, plain.stdout);
}

#[test]
fn an_unknown_event_is_a_clear_error_and_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let out = strobe(
        &[
            "stat",
            "-e",
            "task-clock,no-such-event",
            "--",
            "touch",
            marker.to_str().unwrap(),
        ],
        &[],
    );
    assert_ne!(out.status.code(), Some(0));
    let err = text(&out.stderr);
    assert!(err.contains("no-such-event"), "{err}");
    assert!(!marker.exists(), "the command ran");
    // Runs of different groups cannot share intervals or threads.
    for extra in [&["-I", "100"][..], &["--per-thread"][..]] {
        let mut argv = vec!["stat", "--passes", "auto"];
        argv.extend_from_slice(extra);
        argv.extend(["--", "touch", marker.to_str().unwrap()]);
        let out = strobe(&argv, &[]);
        assert_ne!(out.status.code(), Some(0), "{extra:?}");
        assert!(
            text(&out.stderr).contains("cannot be combined"),
            "{extra:?}"
        );
        assert!(!marker.exists(), "the command ran");
    }
}

#[test]
fn derived_metrics_from_a_user_file_are_computed_from_their_counters() {
    let exe = touch_pages();
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("metrics.toml");
    std::fs::write(
        &defs,
        "[[metric]]\nname = \"faults-per-cpu-ms\"\nexpr = \"`page-faults` / `task-clock` * 1e6\"\nunit = \"faults/ms\"\n",
    )
    .unwrap();
    let out = strobe(
        &[
            "stat",
            "-M",
            "faults-per-cpu-ms,cpu-utilisation",
            "--format",
            "csv",
            "--",
            exe.to_str().unwrap(),
            "2000",
            "100",
        ],
        &[("STROBE_METRICS", defs.to_str().unwrap())],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("not a strobe setting"), "{err}");
    let counts: Vec<_> = csv_counts(&err)
        .into_iter()
        .filter(|(e, _, _)| !e.is_empty())
        .collect();
    let metric = |name: &str| -> f64 {
        err.lines()
            .find(|l| l.starts_with(",,,,,") && l.ends_with(&format!(",{name}")))
            .unwrap_or_else(|| panic!("{name} in {err}"))
            .split(',')
            .nth(5)
            .unwrap()
            .parse()
            .unwrap()
    };
    let expected = value(&counts, "page-faults") / value(&counts, "task-clock");
    let got = metric("faults-per-cpu-ms");
    assert!(
        (got - expected).abs() <= expected * 0.01,
        "{got} vs {expected}: {err}"
    );
    // CPU time over wall time: how much of a core the program got (under a
    // loaded CI, less than half of one, so only the arithmetic is checked).
    let utilisation = metric("cpu-utilisation");
    let expected = value(&counts, "task-clock") / value(&counts, "duration_time");
    assert!(
        utilisation > 0.0
            && utilisation <= 1.05
            && (utilisation - expected).abs() <= expected * 0.01,
        "{utilisation} vs {expected}: {err}"
    );
    // An expression error names the file, line and column.
    std::fs::write(&defs, "[[metric]]\nname = \"bad\"\nexpr = \"a / (b\"\n").unwrap();
    let out = strobe(
        &["stat", "-M", "bad", "--", "true"],
        &[("STROBE_METRICS", defs.to_str().unwrap())],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("metrics.toml") && err.contains("line 3"),
        "{err}"
    );
}

#[test]
fn counters_beyond_the_slots_run_in_one_pass_per_group_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let script = format!("echo run >> {}", runs.display());
    let events = "task-clock,page-faults,context-switches,cpu-migrations,minor-faults";
    let slots = [("STROBE_PMU_SLOTS", "2")];
    // One run: the groups are scheduled together (software events never
    // wait for a slot, so nothing is scaled).
    let out = strobe(&["stat", "-e", events, "--", "sh", "-c", &script], &slots);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&runs).unwrap().lines().count(), 1);
    // One run per group of at most two.
    let out = strobe(
        &[
            "stat", "--passes", "auto", "-e", events, "--format", "table", "--", "sh", "-c",
            &script,
        ],
        &slots,
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(std::fs::read_to_string(&runs).unwrap().lines().count(), 4);
    assert!(err.contains("counted in 3 runs"), "{err}");
    for event in events.split(',') {
        assert!(
            err.lines()
                .any(|l| l.split_whitespace().nth(1).is_some_and(|w| w == event)
                    || l.split_whitespace().nth(2).is_some_and(|w| w == event)),
            "{event} in {err}"
        );
    }
    // Fewer passes than groups: refused before anything runs.
    let out = strobe(
        &[
            "stat", "--passes", "2", "-e", events, "--", "sh", "-c", &script,
        ],
        &slots,
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("3 groups"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(std::fs::read_to_string(&runs).unwrap().lines().count(), 4);
}

#[test]
fn per_thread_counts_add_up_to_the_total() {
    let exe = touch_pages();
    let out = strobe(
        &[
            "stat",
            "--per-thread",
            "-e",
            "task-clock",
            "--format",
            "csv",
            "--",
            exe.to_str().unwrap(),
            "10",
            "100",
            "3",
        ],
        &[],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    // `pid/tid,value,unit,event,...` per thread, then the total.
    let mut threads = 0.0;
    let mut rows = 0;
    let mut total = None;
    for l in err.lines() {
        let f: Vec<&str> = l.split(',').collect();
        if f[0].contains('/') {
            rows += 1;
            threads += f[1].parse::<f64>().unwrap();
        } else {
            total = Some(f[0].parse::<f64>().unwrap());
        }
    }
    assert_eq!(rows, 3, "{err}");
    let total = total.unwrap();
    assert!(
        (threads - total).abs() < 0.01 * total,
        "{threads} vs {total}: {err}"
    );
    assert!(total > 250.0, "{err}");
}
