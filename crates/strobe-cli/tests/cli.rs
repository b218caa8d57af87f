//! The `strobe query`, `strobe merge` and `strobe summary` commands, run as
//! the built binary on real profile databases written by strobe-db's writer.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use strobe_db::{NodeInfo, ProcessInfo, Region, StackFrame, ThreadInfo, Writer, WriterOptions};

fn strobe(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strobe"))
        .args(args)
        .output()
        .expect("run strobe")
}

fn ok(args: &[&str]) -> String {
    let o = strobe(args);
    assert!(
        o.status.success(),
        "strobe {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn fails(args: &[&str]) -> String {
    let o = strobe(args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!o.status.success(), "strobe {args:?} succeeded");
    assert_eq!(o.status.code(), Some(1), "exit status for {args:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

/// Regions "compute" 10, 20, 30, 40 ns and "io" 100 ns; 4 samples with
/// stacks main→leaf (3) and main (1); process start 1000, end 3000.
fn write_profile(path: &Path, pid: u32) {
    let node = NodeInfo {
        machine_id: "cli-test".into(),
        hostname: "h".into(),
        ..NodeInfo::default()
    };
    let proc_ = ProcessInfo {
        pid,
        ppid: 1,
        init_ns: 1000,
        start_ns: 1000,
        start_unix_ns: 1_700_000_000_000_000_000 + u64::from(pid),
        command: "t".into(),
        environment: vec![],
    };
    let mut w = Writer::create(
        path,
        &proc_,
        WriterOptions {
            node: Some(node),
            ..WriterOptions::default()
        },
    )
    .unwrap();
    let t = w
        .add_thread(&ThreadInfo {
            tid: pid,
            name: Some("main"),
            start_ns: Some(1000),
        })
        .unwrap();
    let compute = w.intern_string("compute").unwrap();
    let io = w.intern_string("io").unwrap();
    for (k, d) in [10u64, 20, 30, 40].into_iter().enumerate() {
        let s = 2000 + 100 * k as u64;
        w.append_region(&Region {
            thread: t,
            start_ns: s,
            end_ns: s + d,
            name: compute,
            category: None,
            stack: None,
            correlation_id: None,
            args: &[],
        })
        .unwrap();
    }
    w.append_region(&Region {
        thread: t,
        start_ns: 2500,
        end_ns: 2600,
        name: io,
        category: None,
        stack: None,
        correlation_id: None,
        args: &[],
    })
    .unwrap();
    let m = w
        .add_module(&strobe_db::ModuleRow {
            path: "/bin/app",
            load_address: 0x1000,
            size: 0x1000,
            ..Default::default()
        })
        .unwrap();
    let track = w.add_track(Some(t), "cpu").unwrap();
    let main = StackFrame {
        module: Some(m),
        rel_pc: 0x10,
    };
    let leaf = StackFrame {
        module: Some(m),
        rel_pc: 0x20,
    };
    for k in 0..3 {
        w.append_sample(
            track,
            strobe_db::SampleMeta::cpu(2000 + k, 1_000_000),
            &[leaf, main],
        )
        .unwrap();
    }
    // One sample standing for three timer periods (expirations merged).
    w.append_sample(track, strobe_db::SampleMeta::cpu(2900, 3_000_000), &[main])
        .unwrap();
    w.finish(3000).unwrap();
}

fn profile(dir: &Path, pid: u32) -> PathBuf {
    let p = dir.join(format!("{pid}.db"));
    write_profile(&p, pid);
    p
}

const SQL: &str =
    "SELECT name, COUNT(*) AS n, SUM(duration) AS total FROM regions GROUP BY name ORDER BY name";

#[test]
fn query_formats() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path(), 10);
    let p = p.to_str().unwrap();
    assert_eq!(
        ok(&["query", "-i", p, "--format", "csv", SQL]),
        "name,n,total\ncompute,4,100\nio,1,100\n"
    );
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["query", "-i", p, "--format", "json", SQL])).unwrap();
    assert_eq!(
        json,
        serde_json::json!([{"name": "compute", "n": 4, "total": 100}, {"name": "io", "n": 1, "total": 100}])
    );
    assert_eq!(
        ok(&["query", "-i", p, "--format", "markdown", SQL]),
        "| name | n | total |\n|---|---|---|\n| compute | 4 | 100 |\n| io | 1 | 100 |\n"
    );
    let table = ok(&["query", "-i", p, SQL]);
    assert!(
        table.contains("compute") && table.contains("│ n"),
        "{table}"
    );
    // An empty result in JSON is an empty array.
    assert_eq!(
        ok(&[
            "query",
            "-i",
            p,
            "--format",
            "json",
            "SELECT * FROM regions WHERE 0"
        ])
        .trim(),
        "[]"
    );
}

#[test]
fn query_time_window() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path(), 11);
    let p = p.to_str().unwrap();
    // Run 1000..3000: the window is [2450, 2600]; only "io" (2500-2600) overlaps it.
    let out = ok(&[
        "query",
        "-i",
        p,
        "--format",
        "csv",
        "--start",
        "1450",
        "--end",
        "80%",
        "SELECT name, start FROM regions ORDER BY start",
    ]);
    assert_eq!(out, "name,start\nio,2500\n");
    let out = ok(&[
        "query",
        "-i",
        p,
        "--format",
        "csv",
        "--end",
        "1050",
        "SELECT COUNT(*) AS n FROM regions_and_samples",
    ]);
    assert_eq!(
        out, "n\n4\n",
        "the first compute region (2000) and three samples (2000-2002) start by 2050"
    );
    let err = fails(&["query", "-i", p, "--start", "soon", "SELECT 1"]);
    assert!(err.contains("invalid time bound `soon`"), "{err}");
}

#[test]
fn query_sql_error_shows_message_and_query() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path(), 12);
    let err = fails(&[
        "query",
        "-i",
        p.to_str().unwrap(),
        "SELECT bogus FROM regions",
    ]);
    assert!(err.contains("no such column: bogus"), "{err}");
    assert!(err.contains("SELECT bogus FROM regions"), "{err}");
}

#[test]
fn bad_inputs_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("text.db");
    std::fs::write(&text, "hello, not a database, just some words\n".repeat(5)).unwrap();
    let err = fails(&["query", "-i", text.to_str().unwrap(), "SELECT 1"]);
    assert!(
        err.contains("text.db") && err.contains("not an SQLite database"),
        "{err}"
    );

    let cut = profile(dir.path(), 20);
    let len = std::fs::metadata(&cut).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&cut)
        .unwrap()
        .set_len(len / 3)
        .unwrap();
    let err = fails(&["summary", "-i", cut.to_str().unwrap()]);
    assert!(
        err.contains("20.db") && err.contains("truncated or corrupt"),
        "{err}"
    );

    let newer = profile(dir.path(), 21);
    {
        let c = rusqlite_conn(&newer);
        let s: String = c
            .query_row(
                "SELECT value FROM rocpd_metadata WHERE tag = 'uuid'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        c.execute(
            &format!("UPDATE rocpd_metadata{s} SET value = '9' WHERE tag = 'schema_version'"),
            [],
        )
        .unwrap();
    }
    let err = fails(&[
        "merge",
        "-i",
        newer.to_str().unwrap(),
        "-o",
        dir.path().join("m.db").to_str().unwrap(),
    ]);
    assert!(
        err.contains("21.db") && err.contains("schema version 9 is newer"),
        "{err}"
    );
    assert!(!dir.path().join("m.db").exists());

    let missing = profile(dir.path(), 22);
    {
        let c = rusqlite_conn(&missing);
        let s: String = c
            .query_row(
                "SELECT value FROM rocpd_metadata WHERE tag = 'uuid'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        c.execute_batch(&format!("DROP VIEW regions; DROP TABLE rocpd_region{s};"))
            .unwrap();
    }
    let err = fails(&["query", "-i", missing.to_str().unwrap(), "SELECT 1"]);
    assert!(
        err.contains("22.db") && err.contains("rocpd_region_"),
        "{err}"
    );

    let err = fails(&[
        "query",
        "-i",
        dir.path().join("absent.db").to_str().unwrap(),
        "SELECT 1",
    ]);
    assert!(err.contains("absent.db"), "{err}");
}

fn rusqlite_conn(p: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(p).unwrap()
}

#[test]
fn merge_25_inputs_then_query_and_summarize() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = dir.path().join("in");
    std::fs::create_dir(&inputs).unwrap();
    for k in 0..25 {
        profile(&inputs, 100 + k);
    }
    let out = dir.path().join("merged.db");
    let o = strobe(&[
        "merge",
        "-i",
        inputs.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("merged 25 files (25 processes"));
    let q = ok(&[
        "query",
        "-i",
        out.to_str().unwrap(),
        "--format",
        "csv",
        "SELECT COUNT(DISTINCT pid) AS p, COUNT(*) AS n FROM regions",
    ]);
    assert_eq!(q, "p,n\n25,125\n");
    // The 25 unmerged inputs open directly too (staged past the attach limit).
    let glob = format!("{}/*.db", inputs.display());
    let q = ok(&[
        "query",
        "-i",
        &glob,
        "--format",
        "csv",
        "SELECT COUNT(*) AS n FROM samples",
    ]);
    assert_eq!(q, "n\n100\n");
    // Merging onto an existing output is refused.
    let err = fails(&[
        "merge",
        "-i",
        inputs.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(err.contains("merged.db"), "{err}");
}

#[test]
fn summary_numbers_and_formats() {
    let dir = tempfile::tempdir().unwrap();
    let a = profile(dir.path(), 30);
    let b = profile(dir.path(), 31);
    let json: serde_json::Value = serde_json::from_str(&ok(&[
        "summary",
        "-i",
        a.to_str().unwrap(),
        "--format",
        "json",
    ]))
    .unwrap();
    let r = &json["regions"];
    assert_eq!(r[0]["name"], "compute");
    assert_eq!(r[0]["total_ns"], 100);
    assert_eq!(r[0]["instances"], 4);
    assert_eq!(r[0]["med_ns"], 25.0);
    assert_eq!(r[0]["min_ns"], 10);
    assert_eq!(r[0]["max_ns"], 40);
    assert!((r[0]["stddev_ns"].as_f64().unwrap() - (500.0f64 / 3.0).sqrt()).abs() < 1e-9);
    assert_eq!(r[0]["time_pct"], 50.0);
    let f = &json["functions"];
    assert_eq!(f[0]["name"], "app+0x20");
    // Shares are of time (the samples' weights), not of sample counts.
    assert_eq!(
        (
            f[0]["self_samples"].as_u64(),
            f[0]["self_ns"].as_u64(),
            f[0]["self_pct"].as_f64()
        ),
        (Some(3), Some(3_000_000), Some(50.0))
    );
    let main = f
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == "app+0x10")
        .unwrap();
    assert_eq!(
        (
            main["self_samples"].as_u64(),
            main["total_samples"].as_u64(),
            main["total_ns"].as_u64(),
            main["total_pct"].as_f64()
        ),
        (Some(1), Some(4), Some(6_000_000), Some(100.0))
    );
    assert_eq!(json["threads"][0]["samples"], 4);

    let csv = ok(&[
        "summary",
        "-i",
        a.to_str().unwrap(),
        "-i",
        b.to_str().unwrap(),
        "--format",
        "csv",
        "--report",
        "regions",
    ]);
    assert_eq!(
        csv,
        "# regions\nTime (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\n\
         50,200,8,25,25,10,40,11.952286093343936,compute\n50,200,2,100,100,100,100,0,io\n"
    );
    let by = ok(&[
        "summary",
        "-i",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--format",
        "csv",
        "--report",
        "regions",
        "--by-process",
    ]);
    assert_eq!(by.lines().count(), 2 + 4);
    assert!(by.lines().nth(1).unwrap().starts_with("PID,Time (%)"));
    // --limit counts per process with --by-process: both processes appear.
    let per = ok(&[
        "summary",
        "-i",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--by-process",
        "--limit",
        "1",
        "--report",
        "functions",
        "--format",
        "csv",
    ]);
    let pids: Vec<&str> = per
        .lines()
        .skip(2)
        .map(|l| l.split(',').next().unwrap())
        .collect();
    assert_eq!(pids, ["30", "31"], "{per}");
    // Two runs' directories: one set of tables each unless --merge-runs.
    let runs = dir.path().join("runs");
    for (run, db) in [("r1", &a), ("r2", &b)] {
        let host = runs.join(run).join("host");
        std::fs::create_dir_all(&host).unwrap();
        std::fs::copy(db, host.join(db.file_name().unwrap())).unwrap();
    }
    let each = ok(&[
        "summary",
        "-i",
        runs.to_str().unwrap(),
        "--report",
        "threads",
        "--format",
        "csv",
    ]);
    assert_eq!(each.matches("# run ").count(), 2, "{each}");
    let merged = ok(&[
        "summary",
        "-i",
        runs.to_str().unwrap(),
        "--report",
        "threads",
        "--format",
        "csv",
        "--merge-runs",
    ]);
    assert!(!merged.contains("# run"), "{merged}");
    let json = strobe(&["summary", "-i", runs.to_str().unwrap(), "--format", "json"]);
    assert_eq!(json.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&json.stderr).contains("--merge-runs"));
    // An end before the start is refused, saying so.
    let inverted = strobe(&[
        "summary",
        "-i",
        a.to_str().unwrap(),
        "--start",
        "90%",
        "--end",
        "10%",
    ]);
    assert_eq!(inverted.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&inverted.stderr).contains("ends before it starts"));
    let limited = ok(&[
        "summary",
        "-i",
        a.to_str().unwrap(),
        "--format",
        "csv",
        "--report",
        "functions",
        "--limit",
        "1",
    ]);
    assert_eq!(
        limited,
        "# functions\nSelf (%),Self (ms),Total (%),Total (ms),Self Samples,Off-CPU Self (ms),Off-CPU Total (ms),Name\n50,3,50,3,3,0,0,app+0x20\n"
    );
    let table = ok(&["summary", "-i", a.to_str().unwrap()]);
    for needle in [
        "Regions:",
        "Time (%)",
        "StdDev (ns)",
        "Sampled functions",
        "Threads:",
        "app+0x20",
    ] {
        assert!(table.contains(needle), "{needle} in {table}");
    }
}

#[test]
fn sample_help_shows_every_settings_default() {
    let help = ok(&["sample", "--help"]);
    assert!(
        help.contains("default: 250;"),
        "sampling_freq's default: {help}"
    );
    assert!(
        help.contains("default: that of --sampling-freq;"),
        "an inherited default names its parent"
    );
    assert!(help.contains("[default: 10]"), "--top's default");
}
