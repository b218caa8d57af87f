//! Trust: nothing outside the run reaches the collector, programs that
//! handle their own faults behave as without strobe, and names from the
//! program are safe to print.
//!
//! Each test is one of the ways this went wrong: another user's silent
//! connection stalled a run; a forged handover was written into the run;
//! `stress-ng --sigsegv` (and a program with its fault handler on a small
//! alternate stack) died under strobe; a thread name cleared the screen;
//! children that ended before the collector looked at their connection
//! were refused as strangers, or dropped without a word.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The connect_to_collector.py helper with `args`.
fn connector(args: &[&str]) -> Command {
    let mut cmd = clean_command("python3");
    cmd.arg(programs_dir().join("connect_to_collector.py"))
        .args(args);
    cmd
}

/// `strobe sample -q --output-dir OUT -- argv`.
fn sample(out: &Path, argv: &[&str]) -> Command {
    let mut cmd = strobe_command();
    cmd.args(["sample", "-q", "--output-dir"])
        .arg(out)
        .arg("--")
        .args(argv);
    cmd
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A connection from another user that sends nothing (or a forged
/// handover) is refused at once and named: the run ends as soon as its
/// program does, not when the connection closes.
fn outsider_is_refused(forge: bool) {
    if !is_root() {
        eprintln!("skipped: becoming another user (nobody) needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut run = sample(dir.path(), &["sh", "-c", "sleep 1.5; echo done"]);
    run.stdout(Stdio::piped()).stderr(Stdio::piped());
    let started = Instant::now();
    let strobe = run.spawn().unwrap();
    let pid = strobe.id().to_string();
    let mut args = vec!["outsider", pid.as_str(), "30"];
    if forge {
        args.push("forge");
    }
    let mut intruder = connector(&args).stdout(Stdio::piped()).spawn().unwrap();
    let out = strobe.wait_with_output().unwrap();
    let took = started.elapsed();
    let _ = intruder.kill();
    let said = text(&intruder.wait_with_output().unwrap().stdout);
    let err = text(&out.stderr);
    assert!(
        said.contains("connected"),
        "the helper did not connect: {said}"
    );
    assert!(out.status.success(), "{err}");
    assert_eq!(text(&out.stdout), "done\n");
    // The connection stays open for 30 s; the run takes 1.5 s and what
    // strobe adds (a debug build on a loaded machine: seconds, not 28).
    assert!(
        took < Duration::from_secs(15),
        "the run took {took:?}: {err}"
    );
    assert!(
        err.contains("refused a connection from pid")
            && err.contains("(uid 65534): not a process of this run"),
        "{err}"
    );
    // Nothing was written for the outsider.
    let outsider = said.trim().strip_prefix("connected ").unwrap_or_default();
    assert!(!outsider.is_empty(), "{said}");
    let dbs = databases(dir.path());
    assert!(
        !dbs.iter()
            .any(|db| db.file_stem().is_some_and(|s| s == outsider)),
        "a database of the outsider {outsider}: {dbs:?}"
    );
}

#[test]
fn a_silent_connection_from_another_user_is_refused_and_delays_nothing() {
    outsider_is_refused(false);
}

#[test]
fn a_handover_from_another_user_is_refused() {
    outsider_is_refused(true);
}

#[test]
fn a_run_that_changes_user_is_still_profiled() {
    if !is_root() {
        eprintln!("skipped: changing user (runuser -u nobody) needs root");
        return;
    }
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    // nobody must be able to run it: a directory of its own, 0755.
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let spin = build_program(&bin, "spin");
    for p in [dir.path(), bin.as_path(), spin.as_path()] {
        std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    let out_dir = dir.path().join("out");
    let out = run_bounded(
        sample(
            &out_dir,
            &[
                "runuser",
                "-u",
                "nobody",
                "--",
                spin.to_str().unwrap(),
                "0.4",
            ],
        ),
        Duration::from_secs(120),
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("refused"), "{err}");
    // The spin, running as nobody, handed over its segment and was
    // sampled.
    let sampled = databases(&out_dir).iter().any(|db| {
        let mut cmd = strobe_command();
        cmd.args(["summary", "--report", "functions", "-i"]).arg(db);
        text(&run_bounded(cmd, Duration::from_secs(60)).stdout).contains("┆ main ")
    });
    assert!(sampled, "no database samples the spin's main:\n{err}");
}

#[test]
fn a_forged_handover_from_a_process_of_the_run_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let script = programs_dir().join("connect_to_collector.py");
    let out = run_bounded(
        sample(dir.path(), &["python3", script.to_str().unwrap(), "member"]),
        Duration::from_secs(120),
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert_eq!(text(&out.stdout), "handed over\n");
    assert!(
        err.contains("refused the handover of pid")
            && err.contains("its process descriptor is of pid"),
        "{err}"
    );
    // The python process itself was profiled as usual (a wrapper that
    // starts it, such as pyenv's, may leave databases too).
    assert!(!databases(dir.path()).is_empty(), "{err}");
}

/// `argv` as a command without strobe.
fn plain_command(argv: &[&str]) -> Command {
    let mut cmd = clean_command(argv[0]);
    cmd.args(&argv[1..]);
    cmd
}

/// Runs `argv` without and with strobe `runs` times each; every run's
/// status and stdout must be the first plain run's.
fn same_with_and_without(argv: &[&str], runs: usize, limit: Duration) {
    let plain = run_bounded(plain_command(argv), limit);
    assert!(
        plain.status.code().is_some(),
        "{argv:?} without strobe: {plain:?}"
    );
    for i in 0..runs {
        let dir = tempfile::tempdir().unwrap();
        let strobed = run_bounded(sample(dir.path(), argv), limit);
        assert_eq!(
            (strobed.status.code(), text(&strobed.stdout)),
            (plain.status.code(), text(&plain.stdout)),
            "{argv:?}, run {i} under strobe (stderr: {})",
            stderr(&strobed)
        );
    }
}

#[test]
fn a_program_that_handles_its_own_faults_behaves_as_without() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let exe = build_program(dir.path(), "own_faults");
    let plain = run_bounded(clean_command(&exe), Duration::from_secs(60));
    assert!(plain.status.success(), "without strobe: {}", stderr(&plain));
    same_with_and_without(&[exe.to_str().unwrap()], 3, Duration::from_secs(120));
}

#[test]
fn strobes_handler_fits_the_room_it_asks_for_on_an_alternate_stack() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("altstack_room");
    cc(&[
        "-O2".into(),
        "-rdynamic".into(),
        "-o".into(),
        exe.display().to_string(),
        programs_dir().join("altstack_room.c").display().to_string(),
    ]);
    let out = run_bounded(
        sample(dir.path(), &[exe.to_str().unwrap()]),
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let used: usize = text(&out.stdout)
        .trim()
        .strip_prefix("altstack_used ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{}", text(&out.stdout)));
    // The samples ran there (kernel frame and handler), and within the
    // room the handler demands before it samples on an alternate stack
    // (strobe_sampler's SAMPLE_STACK_BYTES).
    assert!(used > 1024, "no sample ran on the alternate stack: {used}");
    assert!(
        used < 24 << 10,
        "the handler used {used} bytes of the alternate stack"
    );
}

/// stress-ng, installed with apt-get when missing.
fn stress_ng() -> Option<PathBuf> {
    let find = || {
        ["/usr/bin/stress-ng", "/usr/local/bin/stress-ng"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
    };
    find().or_else(|| {
        if is_root() {
            apt_get_install(&["stress-ng"]);
        }
        find()
    })
}

#[test]
fn stress_ng_signal_timer_and_process_stressors_behave_as_without() {
    let Some(stress) = stress_ng() else {
        eprintln!("skipped: stress-ng is not installed and apt-get could not install it");
        return;
    };
    let _turn = one_at_a_time();
    // Each stressor's failure under strobe was a race: several runs each
    // (STROBE_TEST_STRESS_RUNS, default 2; the issue's figure is 10).
    let runs: usize = std::env::var("STROBE_TEST_STRESS_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(2);
    let stressors = [
        "sigsegv",
        "sigfpe",
        "sigtrap",
        "sigabrt",
        "signest",
        "sigfd",
        "sigsuspend",
        "sigq",
        "sigrt",
        "signal",
        "itimer",
        "timer",
        "clone",
        "fork",
        "vfork",
        "pthread",
        "close",
        "dup",
    ];
    let mut failures = Vec::new();
    for s in stressors {
        let argv = [stress.to_str().unwrap(), &format!("--{s}"), "1", "-t", "1"];
        let outcome = |o: &std::process::Output| {
            (
                o.status.code(),
                stderr(o).contains("successful run completed")
                    || text(&o.stdout).contains("successful run completed"),
            )
        };
        let plain = outcome(&run_bounded(plain_command(&argv), Duration::from_secs(60)));
        for i in 0..runs {
            let dir = tempfile::tempdir().unwrap();
            let o = run_bounded(sample(dir.path(), &argv), Duration::from_secs(120));
            if outcome(&o) != plain {
                failures.push(format!(
                    "{s} run {i}: {:?} under strobe, {plain:?} without:\n{}",
                    outcome(&o),
                    stderr(&o)
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `java` and `javac`, installed with apt-get when missing.
fn jdk() -> Option<(PathBuf, PathBuf)> {
    let find = || {
        let java = PathBuf::from("/usr/bin/java");
        let javac = PathBuf::from("/usr/bin/javac");
        (java.exists() && javac.exists()).then_some((java, javac))
    };
    find().or_else(|| {
        if is_root() {
            apt_get_install(&["openjdk-17-jdk-headless"]);
        }
        find()
    })
}

#[test]
fn a_jvm_handling_its_own_faults_behaves_as_without() {
    let Some((java, javac)) = jdk() else {
        eprintln!("skipped: no JDK, and apt-get could not install openjdk-17-jdk-headless");
        return;
    };
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let built = Command::new(javac)
        .arg("-d")
        .arg(dir.path())
        .arg(programs_dir().join("java/Faults.java"))
        .output()
        .unwrap();
    assert!(built.status.success(), "javac: {}", stderr(&built));
    let classes = dir.path().to_str().unwrap();
    same_with_and_without(
        &[java.to_str().unwrap(), "-cp", classes, "Faults"],
        2,
        Duration::from_secs(120),
    );
}

/// Whether `bytes` hold anything a terminal would act on: C0 controls
/// other than newline, DEL, C1 controls (UTF-8 `c2 80`..`c2 9f`) and the
/// right-to-left override (`e2 80 ae`).
fn raw_controls(bytes: &[u8]) -> Vec<usize> {
    (0..bytes.len())
        .filter(|&i| {
            let b = bytes[i];
            (b < 0x20 && b != b'\n')
                || b == 0x7f
                || (b == 0xc2 && bytes.get(i + 1).is_some_and(|n| (0x80..0xa0).contains(n)))
                || bytes[i..].starts_with(&[0xe2, 0x80, 0xae])
        })
        .collect()
}

#[test]
fn names_with_escape_sequences_reach_the_terminal_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_program(dir.path(), "hostile_names");
    let mut cmd = strobe_command();
    cmd.args(["sample", "--output-dir"])
        .arg(dir.path())
        .arg("--")
        .arg(&exe);
    let out = run_bounded(cmd, Duration::from_secs(120));
    assert!(out.status.success(), "{}", stderr(&out));
    let summary = stderr(&out);
    assert!(
        raw_controls(&out.stderr).is_empty(),
        "raw control bytes at {:?}:\n{summary}",
        raw_controls(&out.stderr)
    );
    for shown in [
        "jit \\x1b[2J\\x1b]0;X\\x07 <b>&amp;\"'</b>",
        "thread \\x1b[2J\\x1b]0;X\\x07\\u{9b}2J",
        "region \\x1b[2J\\x1b]0;X\\x07\\u{202e}evil",
        "marker \\x1b[2J\\x1b]0;X\\x07",
    ] {
        assert!(summary.contains(shown), "{shown} not in:\n{summary}");
    }
    let dbs = databases(dir.path());
    assert_eq!(dbs.len(), 1);
    for report in ["threads", "regions", "all"] {
        let mut cmd = strobe_command();
        cmd.args(["summary", "--report", report, "-i"]).arg(&dbs[0]);
        let o = run_bounded(cmd, Duration::from_secs(60));
        assert!(o.status.success(), "{report}: {}", stderr(&o));
        assert!(
            raw_controls(&o.stdout).is_empty() && raw_controls(&o.stderr).is_empty(),
            "{report}:\n{}",
            text(&o.stdout)
        );
        assert!(
            text(&o.stdout).contains("\\x1b[2J"),
            "{report}:\n{}",
            text(&o.stdout)
        );
    }
    // Every export parses with a real parser of its format, the names in
    // it (the JIT function's name holds markup and escapes too).
    let out_dir = tempfile::tempdir().unwrap();
    let mut cmd = strobe_command();
    cmd.args([
        "convert", "-f", "svg", "json", "csv", "folded", "firefox", "-o", "hostile", "-d",
    ])
    .arg(out_dir.path())
    .arg("-i")
    .arg(&dbs[0]);
    let o = run_bounded(cmd, Duration::from_secs(60));
    assert!(o.status.success(), "{}", stderr(&o));
    let check = r#"
import csv, glob, json, sys, xml.etree.ElementTree as ET
seen = set()
for f in sorted(glob.glob(sys.argv[1] + "/*")):
    if f.endswith(".svg"):
        texts = " ".join(e.text or "" for e in ET.parse(f).iter())
        if "jit \\x1b[2J" in texts and "<b>&amp:" in texts: seen.add("svg")
    elif f.endswith(".json"):
        json.load(open(f, encoding="utf-8"))
        seen.add("json")
    elif f.endswith(".csv"):
        rows = list(csv.reader(open(f, newline="", encoding="utf-8")))
        if any("jit " + chr(27) + "[2J" in c for r in rows for c in r): seen.add("csv")
    elif f.endswith(".folded"):
        if "jit \\x1b[2J" in open(f, encoding="utf-8").read(): seen.add("folded")
print(" ".join(sorted(seen)))
"#;
    let parsed = Command::new("python3")
        .args(["-c", check])
        .arg(out_dir.path())
        .output()
        .unwrap();
    assert!(parsed.status.success(), "{}", stderr(&parsed));
    assert_eq!(
        text(&parsed.stdout).trim(),
        "csv folded json svg",
        "{}",
        stderr(&parsed)
    );
    // Whatever a query selects, printed as a table or Markdown.
    for format in ["table", "markdown"] {
        let mut cmd = strobe_command();
        cmd.args(["query", "--format", format, "-i"])
            .arg(&dbs[0])
            .arg("SELECT string FROM rocpd_string");
        let o = run_bounded(cmd, Duration::from_secs(60));
        assert!(o.status.success(), "{format}: {}", stderr(&o));
        assert!(
            raw_controls(&o.stdout).is_empty(),
            "{format}:\n{}",
            text(&o.stdout)
        );
    }
}

#[test]
fn children_started_with_a_cleared_environment_are_sampled_by_the_kernel_and_named_once() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let spin = build_program(dir.path(), "spin");
    let script = format!(
        "for i in 1 2 3 4 5 6; do env -i {} 0.3; done; echo done",
        spin.display()
    );
    let out = run_bounded(
        sample(dir.path(), &["sh", "-c", &script]),
        Duration::from_secs(120),
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert_eq!(text(&out.stdout), "done\n");
    // One line for the six, none per process.
    let image = spin.display().to_string();
    let of_image = format!(" of {image} ");
    let lines: Vec<&str> = err.lines().filter(|l| l.contains(&of_image)).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains("6 processes of")
            && lines[0].contains("started with a cleared environment")
            && lines[0].contains("sampled by the kernel"),
        "{err}"
    );
    // Each spin left a database of kernel samples (the shell may have one
    // too), its main sampled.
    let dbs = databases(dir.path());
    assert!(dbs.len() >= 6, "{dbs:?}\n{err}");
    let mut spun = 0;
    for db in &dbs {
        let mut cmd = strobe_command();
        cmd.args(["summary", "--report", "functions", "-i"]).arg(db);
        let o = run_bounded(cmd, Duration::from_secs(60));
        spun += usize::from(text(&o.stdout).contains("┆ main "));
    }
    assert!(
        spun >= 5,
        "{spun} of the 6 spins have samples in main:\n{err}"
    );
}

/// Children that live under a millisecond: each connects, records a region
/// and ends, often before the collector has read its parent's announcement
/// (and `/proc` no longer shows whose child it was); with `exec`, each
/// child's second image connects after its first was followed and ended.
/// Every one is kept, and nothing is refused.
fn short_lived_children_are_kept(mode: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let program = build_program(dir.path(), "fork_children");
    let out = dir.path().join("out");
    let n = 200;
    let mut cmd = strobe_command();
    cmd.args(["sample", "--output-dir"])
        .arg(&out)
        .arg("--")
        .arg(&program)
        .arg(n.to_string())
        .args(mode);
    let run = run_bounded(cmd, Duration::from_secs(300));
    assert!(run.status.success(), "{}", stderr(&run));
    assert_eq!(text(&run.stdout).trim(), format!("children {n}"));
    assert!(!stderr(&run).contains("refused"), "{}", stderr(&run));
    let with_region = databases(&out)
        .iter()
        .filter(|db| {
            let c = rusqlite::Connection::open(db).unwrap();
            c.query_row(
                "SELECT count(*) FROM regions WHERE name = 'child_work'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .unwrap()
                == 1
        })
        .count();
    assert_eq!(with_region, n);
}

#[test]
fn every_short_lived_child_is_kept() {
    short_lived_children_are_kept(&[]);
}

#[test]
fn every_short_lived_child_image_is_kept() {
    short_lived_children_are_kept(&["exec"]);
}

/// A program that records a region and ends at once is often reaped by the
/// launcher before the collector has looked at its connection: the launcher
/// announces it, and its region is kept every time.
#[test]
fn a_program_that_ends_at_once_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let program = build_program(dir.path(), "fork_children");
    for round in 0..20 {
        let out = dir.path().join(format!("out{round}"));
        let run = run_bounded(
            sample(&out, &[program.to_str().unwrap(), "child"]),
            Duration::from_secs(60),
        );
        assert!(run.status.success(), "{}", stderr(&run));
        let dbs = databases(&out);
        assert_eq!(dbs.len(), 1, "round {round}: {dbs:?} {}", stderr(&run));
        let c = rusqlite::Connection::open(&dbs[0]).unwrap();
        let regions: i64 = c
            .query_row(
                "SELECT count(*) FROM regions WHERE name = 'child_work'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(regions, 1, "round {round}");
    }
}

/// A forked child keeps its segment to itself until it records something;
/// one that only computes is woken by its first sample (in the signal
/// handler), so its samples reach the collector even when it is killed
/// with SIGKILL and never runs another line of strobe.
#[test]
fn a_forked_child_that_only_computes_and_is_killed_keeps_its_samples() {
    let dir = tempfile::tempdir().unwrap();
    let program = build_program(dir.path(), "fork_children");
    let out = dir.path().join("out");
    let run = run_bounded(
        sample(&out, &[program.to_str().unwrap(), "kill", "400"]),
        Duration::from_secs(60),
    );
    assert!(run.status.success(), "{}", stderr(&run));
    let child: i64 = text(&run.stdout)
        .trim()
        .strip_prefix("killed ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{}", text(&run.stdout)));
    let db = databases(&out)
        .into_iter()
        .find(|db| db.file_stem().and_then(|s| s.to_str()) == Some(&child.to_string()))
        .unwrap_or_else(|| panic!("no database of child {child}: {:?}", databases(&out)));
    let functions = summary_csv(&db, "functions");
    let burn = functions
        .iter()
        .find(|f| f["Name"] == "child_burn")
        .unwrap_or_else(|| panic!("{functions:?}"));
    // 0.4 s of CPU at 250 Hz is about 100 samples.
    let samples: u64 = burn["Self Samples"].parse().unwrap();
    assert!(samples >= 40, "{samples} samples in child_burn");
}
