//! The causal-profiling tables: written by the writer, read back by
//! `strobe_db::causal`, through the unsuffixed views and the reader, and
//! carried by `strobe merge`.

mod common;

use std::path::{Path, PathBuf};

use strobe_db::causal::{self, AnalysisOptions};
use strobe_db::{CausalExperiment, CausalProgress, Profile, ProgressKind, Writer};

fn experiment(selection: &str, speedup: f64, start_ns: u64, duration_ns: u64) -> CausalExperiment {
    let (file, line) = selection
        .rsplit_once(':')
        .map(|(f, l)| (Some(f.to_string()), l.parse().ok()))
        .unwrap_or((None, None));
    CausalExperiment {
        variant: String::new(),
        mode: "line".into(),
        selection: selection.into(),
        file,
        line,
        function: Some("work".into()),
        speedup,
        start_ns,
        duration_ns,
        delay_ns: 1_000,
        selected_samples: 7,
        period_ns: 1_000_000,
        progress: vec![
            CausalProgress {
                name: "items".into(),
                kind: ProgressKind::Throughput,
                visits: 100,
                departures: 0,
                in_flight: 0,
            },
            CausalProgress {
                name: "request".into(),
                kind: ProgressKind::Latency,
                visits: 10,
                departures: 9,
                in_flight: -1,
            },
        ],
    }
}

/// A process database with `experiments` and two in-scope sample counts.
fn write(path: &Path, pid: u32, experiments: &[CausalExperiment]) {
    let mut w = Writer::create(path, &common::process(pid), common::opts()).unwrap();
    for e in experiments {
        w.causal_experiment(e).unwrap();
    }
    w.causal_samples(&[("a.c:10".into(), 5), ("b.c:20".into(), 3)])
        .unwrap();
    w.causal_samples(&[("a.c:10".into(), 2)]).unwrap();
    w.finish(10_000_000_000).unwrap();
}

/// Durations such that `items` runs at `1000 * (1 - s/2)` ns per visit in
/// a.c:10 (slope 0.5) and unchanged in b.c:20.
fn set(pid_offset: u64) -> Vec<CausalExperiment> {
    let mut v = Vec::new();
    let mut t = pid_offset;
    for s in [0.0, 0.25, 0.5] {
        v.push(experiment(
            "a.c:10",
            s,
            t,
            (100_000.0 * (1.0 - s / 2.0)) as u64,
        ));
        t += 1_000_000;
        v.push(experiment("b.c:20", s, t, 100_000));
        t += 1_000_000;
    }
    v
}

#[test]
fn write_read_back_and_analyze() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("1.db");
    let written = set(0);
    write(&db, 1, &written);

    let data = causal::load(&[db.to_str().unwrap()]).unwrap();
    assert_eq!(data.processes.len(), 1);
    let p = &data.processes[0];
    assert_eq!(p.pid, 1);
    assert_eq!(p.experiments, written, "read back exactly as written");
    assert_eq!(
        p.samples,
        vec![("a.c:10".to_string(), 7), ("b.c:20".to_string(), 3)]
    );
    assert_eq!(
        data.progress_points(),
        vec![
            ("items".to_string(), ProgressKind::Throughput),
            ("request".to_string(), ProgressKind::Latency)
        ]
    );

    let a = causal::analyze(
        &data,
        &AnalysisOptions {
            progress: Some("items".into()),
            ..AnalysisOptions::default()
        },
    );
    assert_eq!(a.curves.len(), 2);
    assert_eq!(a.curves[0].selection, "a.c:10");
    assert!((a.curves[0].slope - 0.5).abs() < 1e-9);
    assert_eq!(a.curves[0].file.as_deref(), Some("a.c"));
    assert_eq!(a.curves[0].line, Some(10));
    assert_eq!(a.curves[0].experiments, 3);
    assert_eq!(a.curves[0].selected_samples, 21);
    assert!(a.curves[1].slope.abs() < 1e-9);

    // The unsuffixed views and the joined view, in the file and through
    // the reader.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let n: i64 = conn
        .query_row("SELECT COUNT(*) FROM strobe_causal_experiment", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(n, 6);
    let (kind, visits, departures, in_flight, speedup): (String, i64, i64, i64, f64) = conn
        .query_row(
            "SELECT kind, visits, departures, in_flight, speedup FROM strobe_causal_points WHERE progress = 'request' AND selection = 'b.c:20' ORDER BY start_ns DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )
        .unwrap();
    assert_eq!(
        (kind.as_str(), visits, departures, in_flight),
        ("latency", 10, 9, -1)
    );
    assert_eq!(speedup, 0.5);
    drop(conn);
    let profile = Profile::open(&[db.to_str().unwrap()]).unwrap();
    let n: i64 = profile
        .connection()
        .query_row("SELECT COUNT(*) FROM strobe_causal_points", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(n, 12);
}

/// Two processes, merged: every experiment stays with its own progress
/// rows (ids are per process; the join takes the guid), and the analysis
/// of the merged file equals the analysis of the two files.
#[test]
fn merge_carries_causal_tables() {
    let dir = tempfile::tempdir().unwrap();
    let one = dir.path().join("1.db");
    let two = dir.path().join("2.db");
    write(&one, 1, &set(0));
    write(&two, 2, &set(500));
    let merged = dir.path().join("merged.db");
    strobe_db::merge(&[one.clone(), two.clone()], &merged, &mut |_| {}).unwrap();

    let conn = rusqlite::Connection::open(&merged).unwrap();
    let count = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(count("SELECT COUNT(*) FROM strobe_causal_experiment"), 12);
    assert_eq!(count("SELECT COUNT(*) FROM strobe_causal_progress"), 24);
    assert_eq!(count("SELECT COUNT(*) FROM strobe_causal_points"), 24);
    assert_eq!(
        count("SELECT COUNT(DISTINCT guid) FROM strobe_causal_points"),
        2
    );
    assert_eq!(count("SELECT SUM(count) FROM strobe_causal_sample"), 20);
    // Experiment ids repeat across processes; the guid tells them apart.
    assert_eq!(
        count("SELECT COUNT(*) FROM (SELECT DISTINCT id FROM strobe_causal_experiment)"),
        6
    );
    drop(conn);

    let pooled = causal::load(&[merged.to_str().unwrap()]).unwrap();
    let apart = causal::load(&[one.to_str().unwrap(), two.to_str().unwrap()]).unwrap();
    assert_eq!(pooled.experiment_count(), 12);
    let opts = AnalysisOptions::default();
    assert_eq!(
        causal::analyze(&pooled, &opts).curves,
        causal::analyze(&apart, &opts).curves
    );
    // A directory is searched recursively, as other readers do.
    let from_dir = causal::load(&[dir.path().to_str().unwrap()]).unwrap();
    assert_eq!(from_dir.files.len(), 3);
    assert_eq!(from_dir.experiment_count(), 24);
}

/// Files written before the causal tables existed stay valid: they load
/// with no experiments, merge, and their views show nothing.
#[test]
fn files_without_causal_tables() {
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old.db");
    common::write_small(&old, 5);
    {
        let conn = rusqlite::Connection::open(&old).unwrap();
        let s: String = conn
            .query_row(
                "SELECT substr(name, length('rocpd_metadata') + 1) FROM sqlite_master WHERE type = 'table' AND name LIKE 'rocpd_metadata\\_%' ESCAPE '\\'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        conn.execute_batch(&format!(
            "DROP VIEW strobe_causal_points; DROP VIEW strobe_causal_experiment; DROP VIEW strobe_causal_progress; DROP VIEW strobe_causal_sample;
             DROP TABLE \"strobe_causal_experiment{s}\"; DROP TABLE \"strobe_causal_progress{s}\"; DROP TABLE \"strobe_causal_sample{s}\";"
        ))
        .unwrap();
    }
    let data = causal::load(&[old.to_str().unwrap()]).unwrap();
    assert_eq!(data.experiment_count(), 0);
    assert!(data.processes.is_empty());

    let new = dir.path().join("new.db");
    write(&new, 6, &set(0));
    let merged = dir.path().join("merged.db");
    let inputs: Vec<PathBuf> = vec![old, new];
    strobe_db::merge(&inputs, &merged, &mut |_| {}).unwrap();
    let data = causal::load(&[merged.to_str().unwrap()]).unwrap();
    assert_eq!(data.experiment_count(), 6);
    let profile = Profile::open(&[merged.to_str().unwrap()]).unwrap();
    let n: i64 = profile
        .connection()
        .query_row("SELECT COUNT(*) FROM strobe_causal_points", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(n, 12);
}
