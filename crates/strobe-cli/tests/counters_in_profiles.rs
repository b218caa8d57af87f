//! Counters in profiles (`strobe sample -e/-M`, `--process-sampling-freq`):
//! real C programs (tests/programs) run under the preloaded runtime, checked
//! through the databases they leave, the summary and the exports; and the
//! program behaves as without strobe (descriptors, a program that closes
//! them).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;
use std::time::Duration;
use strobe_db::Profile;

// The tests here compare counters with time: they take turns
// (`one_at_a_time`) rather than compete for the machine's cores.
use common::{
    build_program, databases, fresh_runtime, one_at_a_time, programs_dir, run_bounded,
    strobe_command,
};

/// Builds the test programs once per test binary; returns their directory.
fn built() -> PathBuf {
    static DIR: Mutex<Option<PathBuf>> = Mutex::new(None);
    let mut dir = DIR.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(d) = &*dir {
        return d.clone();
    }
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("counter-programs-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    for name in [
        "counter_regions",
        "touch_pages",
        "list_fds",
        "closes_fds_then_pipe",
    ] {
        build_program(&out, name);
    }
    *dir = Some(out.clone());
    out
}

/// A run past this is killed with its process group and fails the test
/// ("hung").
const HUNG: Duration = Duration::from_secs(60);

/// `strobe sample -q --output-dir <out> <flags> -- <program...>` with none
/// of the caller's `STROBE_*` variables, `env` added.
fn sample(out: &Path, flags: &[&str], env: &[(&str, &str)], program: &[&str]) -> Output {
    let mut cmd = strobe_command();
    cmd.envs(env.iter().copied())
        .args(["sample", "-q", "--output-dir"])
        .arg(out)
        .args(flags)
        .arg("--")
        .args(program);
    let output = run_bounded(cmd, HUNG);
    assert!(
        output.status.success(),
        "strobe sample {flags:?} {program:?}: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// The program alone.
fn plain(program: &[&str]) -> Output {
    let mut cmd = Command::new(program[0]);
    cmd.args(&program[1..]);
    run_bounded(cmd, HUNG)
}

/// The one database of a run.
fn only_database(dir: &Path) -> PathBuf {
    let dbs = databases(dir);
    assert_eq!(
        dbs.len(),
        1,
        "one database expected under {}: {dbs:?}",
        dir.display()
    );
    dbs[0].clone()
}

/// Rows of `sql` on `db`, each column as an optional real (integers and
/// reals) or text.
fn query(db: &Path, sql: &str) -> Vec<Vec<strobe_db::Value>> {
    let p = Profile::open(&[db.display().to_string()]).unwrap();
    let mut rows = Vec::new();
    p.query_each(sql, &mut |_| {}, &mut |r| {
        rows.push(r.to_vec());
        Ok(())
    })
    .unwrap();
    rows
}

fn real(v: &strobe_db::Value) -> Option<f64> {
    match v {
        strobe_db::Value::Integer(i) => Some(*i as f64),
        strobe_db::Value::Real(r) => Some(*r),
        _ => None,
    }
}

fn text(v: &strobe_db::Value) -> String {
    match v {
        strobe_db::Value::Text(t) => t.clone(),
        other => format!("{other:?}"),
    }
}

fn bin(name: &str) -> String {
    built().join(name).display().to_string()
}

/// `key=value` of a line of the program's output.
fn field(line: &str, key: &str) -> f64 {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key}= in {line:?}"))
}

/// The number after the word `key` in a line of the tool's report.
fn after(line: &str, key: &str) -> f64 {
    let mut words = line.split_whitespace();
    words
        .find(|w| *w == key)
        .and(words.next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {line:?}"))
}

#[test]
fn region_counters_follow_cpu_time_and_page_faults() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let out = sample(
        dir.path(),
        &["-e", "task-clock,page-faults"],
        &[],
        &[&bin("counter_regions"), "5", "40", "3", "2000"],
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let db = only_database(dir.path());
    let rows = query(
        &db,
        "SELECT name, duration, counter, value FROM strobe_region_counters ORDER BY start, counter",
    );
    // (name, duration, task-clock, page-faults) per region, in start order.
    let mut regions: Vec<(String, f64, Option<f64>, Option<f64>)> = Vec::new();
    for r in &rows {
        let (name, duration, counter) = (text(&r[0]), real(&r[1]).unwrap(), text(&r[2]));
        if regions
            .last()
            .is_none_or(|l| l.0 != name || l.1 != duration)
        {
            regions.push((name.clone(), duration, None, None));
        }
        let last = regions.last_mut().unwrap();
        match counter.as_str() {
            "task-clock" => last.2 = real(&r[3]),
            "page-faults" => last.3 = real(&r[3]),
            other => panic!("unexpected counter {other}"),
        }
    }
    let burns: Vec<_> = regions.iter().filter(|r| r.0 == "burn").collect();
    let touches: Vec<_> = regions.iter().filter(|r| r.0 == "touch").collect();
    assert_eq!((burns.len(), touches.len()), (5, 3), "{regions:?}");
    let measured: Vec<&str> = stdout.lines().filter(|l| l.starts_with("burn ")).collect();
    assert_eq!(measured.len(), 5, "{stdout}");
    for ((_, duration, task_clock, _), line) in burns.iter().zip(&measured) {
        let task_clock = task_clock.expect("task-clock read around every region");
        let (wall, cpu) = (field(line, "wall_ns"), field(line, "cpu_ns"));
        // A CPU-bound region's task-clock is its duration, unless the
        // machine took the CPU away meanwhile (the program saw its CPU time
        // fall behind the elapsed time): then it is the CPU time it got.
        let reference = if cpu >= 0.95 * wall { *duration } else { cpu };
        let ratio = task_clock / reference;
        assert!(
            (0.9..=1.1).contains(&ratio),
            "task-clock {task_clock} ns over a region of {duration} ns (program: wall {wall}, \
             cpu {cpu}): ratio {ratio:.3}"
        );
    }
    for (_, _, _, faults) in touches {
        let faults = faults.expect("page-faults read around every region");
        assert!(
            faults >= 2000.0,
            "a region touching 2000 pages: {faults} faults"
        );
    }
}

#[test]
fn sample_values_sum_to_the_threads_cpu_time() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let out = sample(
        dir.path(),
        &["-e", "task-clock"],
        &[],
        &[&bin("touch_pages"), "100", "400", "2"],
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let process_cpu = field(stdout.lines().next().unwrap(), "cpu_ns");
    let db = only_database(dir.path());
    let per_thread = query(
        &db,
        "SELECT tid, SUM(value), MAX(value), COUNT(*) FROM strobe_counters \
         WHERE name = 'task-clock' GROUP BY tid",
    );
    assert_eq!(per_thread.len(), 2, "two threads sampled: {per_thread:?}");
    let mut total = 0.0;
    for r in &per_thread {
        let (sum, max) = (real(&r[1]).unwrap(), real(&r[2]).unwrap());
        assert!(
            sum >= 0.85 * 400e6,
            "thread {:?}: its samples' task-clock changes sum to {sum} ns, it burnt 400 ms",
            r[0]
        );
        // Each value is the change since the thread's previous sample (4 ms
        // at 250 Hz; more when the kernel merged expirations).
        assert!(
            max < 100e6,
            "per-interval values, not running totals: {max}"
        );
        total += sum;
    }
    let ratio = total / process_cpu;
    assert!(
        (0.9..=1.02).contains(&ratio),
        "the samples' task-clock changes ({total} ns) against the process's CPU time \
         ({process_cpu} ns): {ratio:.3}"
    );
}

#[test]
fn summary_shows_counter_columns_and_a_stored_metric() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let metrics = dir.path().join("metrics.toml");
    std::fs::write(
        &metrics,
        "[[metric]]\nname = \"faults-per-ms\"\nexpr = \"`page-faults` / `task-clock` * 1e6\"\n\
         description = \"page faults per millisecond of CPU time\"\nunit = \"faults/ms\"\n",
    )
    .unwrap();
    let runs = dir.path().join("runs");
    sample(
        &runs,
        &["-e", "task-clock", "-M", "faults-per-ms"],
        &[("STROBE_METRICS", metrics.to_str().unwrap())],
        &[&bin("counter_regions"), "3", "20", "2", "1000"],
    );
    let db = only_database(&runs);
    // The summary needs no definition file: the database keeps it.
    std::fs::remove_file(&metrics).unwrap();
    let summary = |format: &str| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_strobe"));
        cmd.env_remove("STROBE_METRICS")
            .args(["summary", "--format", format, "-i"])
            .arg(&db);
        let out = run_bounded(cmd, HUNG);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let table = summary("table");
    for wanted in [
        "Region counters",
        "Function counters",
        "task-clock (ns)",
        "page-faults",
        "faults-per-ms (faults/ms)",
    ] {
        assert!(table.contains(wanted), "no {wanted:?} in\n{table}");
    }
    let json: serde_json::Value = serde_json::from_str(&summary("json")).unwrap();
    let regions = json["region_counters"].as_array().expect("region_counters");
    let touch = regions
        .iter()
        .find(|r| r["name"] == "touch")
        .expect("the touch regions");
    assert_eq!(touch["count"], 2);
    let faults = touch["counters"]["page-faults"].as_f64().unwrap();
    let clock = touch["counters"]["task-clock"].as_f64().unwrap();
    assert!(faults >= 2000.0, "{touch}");
    let metric = touch["metrics"]["faults-per-ms"].as_f64().unwrap();
    assert!(
        (metric - faults / clock * 1e6).abs() <= 1e-9 * metric.abs().max(1.0),
        "faults-per-ms {metric} from {faults} faults in {clock} ns"
    );
    let functions = json["function_counters"]
        .as_array()
        .expect("function_counters");
    assert!(
        functions
            .iter()
            .any(|f| f["counters"]["task-clock"].as_f64().unwrap_or(0.0) > 0.0),
        "{functions:?}"
    );
    // Without counters the summary has no counter tables.
    let plain_runs = dir.path().join("plain");
    sample(
        &plain_runs,
        &[],
        &[],
        &[&bin("counter_regions"), "1", "10", "1", "10"],
    );
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_strobe"));
    cmd.args(["summary", "-i"]).arg(only_database(&plain_runs));
    let text = String::from_utf8(run_bounded(cmd, HUNG).stdout).unwrap();
    assert!(
        text.contains("Regions") && !text.contains("counters"),
        "{text}"
    );
}

/// The perf descriptors of a `list_fds` listing, per process (`main`,
/// `child`).
fn perf_descriptors(listing: &str, who: &str) -> usize {
    listing
        .lines()
        .filter(|l| l.starts_with(&format!("{who} ")) && l.ends_with("anon_inode:[perf_event]"))
        .count()
}

#[test]
fn without_counters_the_program_gets_no_descriptor_and_no_counter_rows() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let program = [bin("list_fds")];
    let program: Vec<&str> = program.iter().map(String::as_str).collect();
    let alone = plain(&program);
    assert!(alone.status.success());
    let profiled = sample(dir.path(), &[], &[], &program);
    assert_eq!(
        String::from_utf8_lossy(&profiled.stdout),
        String::from_utf8_lossy(&alone.stdout),
        "the descriptors the program sees under strobe (no counters) differ from its own"
    );
    let db = only_database(dir.path());
    let count = |sql: &str| real(&query(&db, sql)[0][0]).unwrap();
    assert_eq!(count("SELECT COUNT(*) FROM rocpd_pmc_event"), 0.0);
    assert_eq!(
        count(
            "SELECT COUNT(*) FROM rocpd_info_pmc \
             WHERE json_extract(extdata, '$.strobe') = 'sampling_events'"
        ),
        0.0
    );
    assert_eq!(count("SELECT COUNT(*) FROM strobe_metric"), 0.0);
    // With a counter the two threads carry one descriptor each.
    let counted = sample(
        &dir.path().join("counted"),
        &["-e", "task-clock"],
        &[],
        &program,
    );
    let listing = String::from_utf8_lossy(&counted.stdout);
    assert_eq!(perf_descriptors(&listing, "main"), 2, "{listing}");
}

#[test]
fn a_forked_child_carries_only_its_own_counter_descriptors() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let out = sample(
        dir.path(),
        &["-e", "task-clock,page-faults"],
        &[],
        &[&bin("list_fds"), "fork"],
    );
    let listing = String::from_utf8_lossy(&out.stdout);
    // The parent: two threads, two counters each. The child: its one
    // thread's own (the parent's, which count the parent's threads, are
    // closed in it).
    assert_eq!(perf_descriptors(&listing, "main"), 4, "{listing}");
    assert_eq!(perf_descriptors(&listing, "child"), 2, "{listing}");
}

#[test]
fn a_program_that_closes_its_descriptors_behaves_as_without_strobe() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let program = [bin("closes_fds_then_pipe")];
    let program: Vec<&str> = program.iter().map(String::as_str).collect();
    let alone = plain(&program);
    assert!(alone.status.success(), "{alone:?}");
    // Its pipe takes the numbers the main thread's counters had: strobe
    // must neither read nor close it.
    let profiled = sample(dir.path(), &["-e", "task-clock,page-faults"], &[], &program);
    assert_eq!(
        String::from_utf8_lossy(&profiled.stdout),
        String::from_utf8_lossy(&alone.stdout)
    );
    let db = only_database(dir.path());
    let rows = query(
        &db,
        "SELECT tid, COUNT(*), COUNT(value) FROM strobe_region_counters \
         WHERE counter = 'task-clock' GROUP BY tid ORDER BY tid",
    );
    assert_eq!(rows.len(), 2, "{rows:?}");
    // The main thread's counters were closed by the program: missing.
    // The worker's, opened after, were read.
    let missing: Vec<f64> = rows
        .iter()
        .map(|r| real(&r[1]).unwrap() - real(&r[2]).unwrap())
        .collect();
    assert_eq!(
        missing.iter().filter(|&&m| m == 10.0).count(),
        1,
        "{rows:?}"
    );
    assert_eq!(missing.iter().filter(|&&m| m == 0.0).count(), 1, "{rows:?}");
}

#[test]
fn hardware_counters_that_cannot_open_are_noted_and_the_run_goes_on() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let out = sample(
        dir.path(),
        &["-e", "task-clock,cycles"],
        &[],
        &[&bin("touch_pages"), "100", "100"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let db = only_database(dir.path());
    let names: Vec<String> = query(
        &db,
        "SELECT DISTINCT name FROM strobe_counters WHERE tid IS NOT NULL ORDER BY name",
    )
    .iter()
    .map(|r| text(&r[0]))
    .collect();
    if stderr.contains("counter `cycles` is not counted") {
        eprintln!("this machine has no PMU for `cycles`: checking the note");
        assert_eq!(
            stderr.matches("counter `cycles` is not counted").count(),
            1,
            "said once: {stderr}"
        );
        assert!(names.contains(&"task-clock".to_string()), "{names:?}");
        assert!(!names.contains(&"cycles".to_string()), "{names:?}");
    } else {
        eprintln!("this machine counts `cycles`: checking its values");
        assert!(names.contains(&"cycles".to_string()), "{names:?}\n{stderr}");
    }
}

#[test]
fn process_series_and_counter_tracks_reach_perfetto() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    sample(
        dir.path(),
        &[
            "-e",
            "task-clock",
            "--process-sampling-freq",
            "50",
            "--format",
            "pftrace",
        ],
        &[],
        &[&bin("touch_pages"), "20000", "300"],
    );
    let db = only_database(dir.path());
    let series = query(
        &db,
        "SELECT name, COUNT(*), MAX(value) FROM strobe_counters WHERE tid IS NULL GROUP BY name",
    );
    let get = |name: &str| {
        series
            .iter()
            .find(|r| text(&r[0]) == name)
            .map(|r| (real(&r[1]).unwrap(), real(&r[2]).unwrap()))
            .unwrap_or_else(|| panic!("no {name} series: {series:?}"))
    };
    let (points, max_rss) = get("rss");
    assert!(points >= 3.0, "{series:?}");
    assert!(
        max_rss >= 20000.0 * 4.0,
        "20000 pages touched: rss {max_rss} KiB"
    );
    assert!(get("threads").1 >= 1.0);
    let (_, busiest) = get("cpu_utilisation");
    assert!(busiest > 0.3 && busiest < 4.0, "{series:?}");
    let traces: Vec<PathBuf> = std::fs::read_dir(
        databases(dir.path())[0]
            .parent()
            .and_then(Path::parent)
            .unwrap(),
    )
    .unwrap()
    .flatten()
    .map(|e| e.path())
    .filter(|p| p.extension().is_some_and(|x| x == "pftrace"))
    .collect();
    assert_eq!(traces.len(), 1, "{traces:?}");
    let trace = std::fs::read(&traces[0]).unwrap();
    for name in [&b"task-clock"[..], b"cpu_utilisation", b"rss"] {
        assert!(
            trace.windows(name.len()).any(|w| w == name),
            "no {} counter track in the trace",
            String::from_utf8_lossy(name)
        );
    }
}

#[test]
fn a_tool_plugin_counts_the_programs_regions_through_the_runtimes_c_api() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    // Linked with nothing: strobe_metrics_* must come from the runtime.
    let tool = dir.path().join("libmetrics_tool.so");
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../include");
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&tool)
        .arg(programs_dir().join("metrics_tool.c"))
        .arg(format!("-I{}", include.display()))
        .arg("-lpthread")
        .status()
        .expect("cc runs");
    assert!(status.success(), "cc metrics_tool.c");
    let report = dir.path().join("report.txt");
    let out = sample(
        dir.path(),
        &[],
        &[
            ("STROBE_TOOL_LIB", tool.to_str().unwrap()),
            ("METRICS_TOOL_REPORT", report.to_str().unwrap()),
        ],
        &[&bin("counter_regions"), "3", "40", "2", "500"],
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let rep = std::fs::read_to_string(&report).unwrap_or_else(|e| {
        panic!(
            "the tool wrote no report ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert!(!rep.contains("error"), "{rep}");
    let lines: Vec<&str> = rep.lines().collect();
    let names: Vec<&str> = lines.iter().map(|l| l.split(' ').nth(1).unwrap()).collect();
    assert_eq!(names, ["burn", "burn", "burn", "touch", "touch"], "{rep}");
    let measured: Vec<&str> = stdout.lines().filter(|l| l.starts_with("burn ")).collect();
    for (line, program) in lines.iter().zip(&measured) {
        let (counted, cpu) = (after(line, "task-clock"), field(program, "cpu_ns"));
        assert!(
            (counted - cpu).abs() <= 0.1 * cpu,
            "the tool counted {counted} ns of task-clock, the program measured {cpu} ns: {line}"
        );
        assert_eq!(
            (after(line, "depth"), after(line, "completions")),
            (0.0, 1.0),
            "{line}"
        );
    }
    for line in &lines[3..] {
        assert!(after(line, "page-faults") >= 500.0, "{line}");
    }
}

#[test]
fn an_unknown_counter_or_metric_is_a_clear_error_and_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    for (flag, name, says) in [
        ("-e", "no-such-counter", "unknown event `no-such-counter`"),
        ("-M", "no-such-metric", "unknown metric `no-such-metric`"),
        ("-e", "proc/rss/", "describes the whole process"),
    ] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_strobe"));
        cmd.env("STROBE_RUNTIME", fresh_runtime())
            .args(["sample", "-q", "--output-dir"])
            .arg(dir.path().join("out"))
            .args([flag, name, "--", "touch"])
            .arg(&marker);
        let out = run_bounded(cmd, HUNG);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{flag} {name}: {err}");
        assert!(err.contains(says), "{flag} {name}: {err}");
        assert!(!marker.exists(), "{flag} {name}: the program ran");
    }
}
