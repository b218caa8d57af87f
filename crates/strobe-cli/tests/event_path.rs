//! The event path from the program's rings to the database: every region
//! arrives exactly once and in order, from one region to ten million, with
//! one thread or several; and a collector killed mid-run leaves a readable
//! database holding every region that ended more than a second before.

mod common;

use common::{
    build_program, databases, one_at_a_time, run_bounded, stderr, strobe_command, summary_csv,
};
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// One region row as the test reads it: name, start, end.
type Row = (String, i64, i64);

/// One `strobe_region_stats` row: calls, total, self, kept.
type Calls = (u64, i64, i64, u64);

/// Every region of the database, per OS thread, in row-id order.
fn regions_by_thread(db: &Path) -> HashMap<i64, Vec<Row>> {
    let conn = rusqlite::Connection::open(db).expect("the database opens");
    let mut st = conn
        .prepare(
            "SELECT T.tid, S.string, R.start, R.\"end\" FROM rocpd_region R \
             JOIN rocpd_string S ON S.id = R.name_id JOIN rocpd_info_thread T ON T.id = R.tid \
             ORDER BY R.id",
        )
        .unwrap();
    let mut by_thread: HashMap<i64, Vec<Row>> = HashMap::new();
    let rows = st
        .query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?, r.get(3)?))))
        .unwrap();
    for row in rows {
        let (tid, row) = row.unwrap();
        by_thread.entry(tid).or_default().push(row);
    }
    by_thread
}

/// Checks that `rows` are region_stream's first rows in its order (groups
/// of leaf_a, leaf_b, mid with the leaves inside their mid, then single
/// leaf_a regions, each starting no earlier than the previous ended);
/// `whole` says the thread's `regions` rows must all be there.
fn check_pattern(rows: &[Row], regions: usize, whole: bool) {
    if whole {
        assert_eq!(rows.len(), regions, "regions of one thread");
    } else {
        assert!(rows.len() <= regions, "more rows than the program made");
    }
    let groups = regions / 3;
    let mut last_end = i64::MIN;
    let mut k = 0;
    while k < rows.len() {
        if k / 3 < groups {
            let group = &rows[k..rows.len().min(k + 3)];
            let names: Vec<&str> = group.iter().map(|r| r.0.as_str()).collect();
            assert_eq!(
                names,
                ["leaf_a", "leaf_b", "mid"][..group.len()],
                "rows {k}.. of a thread"
            );
            if let [a, b, m] = group {
                assert!(
                    m.1 <= a.1 && a.2 <= b.1 && b.2 <= m.2,
                    "rows {k}..: leaves inside mid, in order: {group:?}"
                );
                assert!(m.1 >= last_end, "row {k} starts before row {} ended", k - 1);
                last_end = m.2;
            }
            k += 3;
        } else {
            assert_eq!(rows[k].0, "leaf_a", "row {k}");
            assert!(
                rows[k].1 >= last_end,
                "row {k} starts before the last ended"
            );
            last_end = rows[k].2;
            k += 1;
        }
    }
}

#[test]
fn every_region_arrives_once_and_in_order_from_one_to_ten_million() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let program = build_program(dir.path(), "region_stream");
    for (regions, threads) in [
        (1usize, 1usize),
        (2, 1),
        (3, 1),
        (1000, 1),
        (100_001, 2),
        (1_000_000, 1),
        (10_000_000, 1),
    ] {
        let out = dir.path().join(format!("out-{regions}-{threads}"));
        let mut cmd = strobe_command();
        cmd.args([
            "sample",
            "-q",
            "--no-symbols",
            "--use-sampling=false",
            "--output-dir",
        ])
        .arg(&out)
        .arg("--")
        .arg(&program)
        .args([regions.to_string(), threads.to_string()]);
        let run = run_bounded(cmd, Duration::from_secs(600));
        assert!(run.status.success(), "{regions} regions: {}", stderr(&run));
        let dbs = databases(&out);
        assert_eq!(dbs.len(), 1, "{dbs:?}");
        let by_thread = regions_by_thread(&dbs[0]);
        assert_eq!(by_thread.len(), threads, "{regions} regions: threads");
        for rows in by_thread.values() {
            check_pattern(rows, regions, true);
        }
        let conn = rusqlite::Connection::open(&dbs[0]).unwrap();
        let dropped: Option<String> = conn
            .query_row(
                "SELECT value FROM strobe_settings WHERE name = 'buffer.records_dropped'",
                [],
                |r| r.get(0),
            )
            .ok();
        assert!(
            matches!(dropped.as_deref(), None | Some("0")),
            "{regions} regions: records dropped: {dropped:?}"
        );
        // Keep the disk free for the next size.
        let _ = std::fs::remove_dir_all(&out);
    }
}

#[test]
fn a_killed_collector_keeps_every_region_older_than_a_second() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let program = build_program(dir.path(), "region_stream");
    let out = dir.path().join("out");
    // 3000 regions, then 10 ms asleep: about 300 000 regions/s, for 20 s
    // unless killed.
    let mut cmd = strobe_command();
    cmd.args(["sample", "-q", "--no-symbols", "--output-dir"])
        .arg(&out)
        .arg("--")
        .arg(&program)
        .args(["6000000", "1", "10000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut strobe = cmd.spawn().unwrap();
    let lines = BufReader::new(strobe.stdout.take().unwrap());
    let mut done: Vec<(usize, u64)> = Vec::new();
    let mut killed_at = None;
    for line in lines.lines() {
        let line = line.unwrap();
        let f: Vec<&str> = line.split(' ').collect();
        done.push((f[1].parse().unwrap(), f[2].parse().unwrap()));
        if killed_at.is_none() && done.len() >= 300 {
            // About 3 s in: the collector dies, the program runs on.
            strobe.kill().unwrap();
            killed_at = Some(strobe_core::clock::now_ns());
            break;
        }
    }
    let killed_at = killed_at.expect("the program reported its progress");
    let _ = strobe.wait();
    // The program (the launcher's child) outlives its collector: end it.
    let _ = Command::new("pkill")
        .arg("-KILL")
        .arg("-f")
        .arg(&program)
        .status();
    let dbs = databases(&out);
    assert_eq!(dbs.len(), 1, "{dbs:?}");
    let by_thread = regions_by_thread(&dbs[0]);
    let rows = by_thread.values().next().map_or(&[][..], |r| r.as_slice());
    check_pattern(rows, 6_000_000, false);
    let older = done
        .iter()
        .filter(|(_, at)| *at + 1_000_000_000 <= killed_at)
        .map(|(n, _)| *n)
        .max()
        .unwrap_or(0);
    assert!(older > 0, "the run lasted over a second before the kill");
    assert!(
        rows.len() >= older,
        "the database holds {} regions; {older} had ended more than 1 s before the kill",
        rows.len()
    );
}

#[test]
fn a_time_filter_stores_the_long_regions_and_counts_every_one_exactly() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let program = build_program(dir.path(), "region_stream");
    let out = dir.path().join("out");
    // 2 threads × 30 000 regions (10 000 calls of mid, each with leaf_a and
    // leaf_b); every 100th leaf_b lasts 50 µs, the rest well under 10 µs.
    let (regions, threads, slow_every) = (30_000u64, 2usize, 100u64);
    let mut cmd = strobe_command();
    cmd.args([
        "sample",
        "-q",
        "--no-symbols",
        "--trace-time-filter",
        "10us",
        "--output-dir",
    ])
    .arg(&out)
    .arg("--")
    .arg(&program)
    .args([
        regions.to_string(),
        threads.to_string(),
        "0".into(),
        slow_every.to_string(),
    ]);
    let run = run_bounded(cmd, Duration::from_secs(300));
    assert!(run.status.success(), "{}", stderr(&run));
    let dbs = databases(&out);
    assert_eq!(dbs.len(), 1, "{dbs:?}");
    let calls = regions / 3;
    let slow = calls / slow_every;
    // The database keeps the regions of 10 µs or more: every slow leaf_b
    // and its mid, and whatever else a preemption stretched that far.
    let by_thread = regions_by_thread(&dbs[0]);
    assert_eq!(by_thread.len(), threads);
    let mut stored: HashMap<(i64, String), u64> = HashMap::new();
    for (tid, rows) in &by_thread {
        assert!(
            rows.iter().all(|r| r.2 - r.1 >= 10_000),
            "only regions of 10 µs or more"
        );
        for r in rows {
            *stored.entry((*tid, r.0.clone())).or_default() += 1;
        }
    }
    // Every call is counted, per thread and name, exactly as the program made them.
    let conn = rusqlite::Connection::open(&dbs[0]).unwrap();
    let mut st = conn
        .prepare(
            "SELECT T.tid, S.string, C.calls, C.total_ns, C.self_ns, C.kept FROM strobe_region_stats C \
             JOIN rocpd_string S ON S.id = C.name_id JOIN rocpd_info_thread T ON T.id = C.thread_id",
        )
        .unwrap();
    let stats: Vec<(i64, String, u64, i64, i64, u64)> = st
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(stats.len(), 3 * threads, "{stats:?}");
    let mut per_thread: HashMap<i64, HashMap<String, Calls>> = HashMap::new();
    for (tid, name, c, total, own, kept) in stats {
        per_thread
            .entry(tid)
            .or_default()
            .insert(name, (c, total, own, kept));
    }
    let mut stored_by_name: HashMap<String, u64> = HashMap::new();
    for (tid, names) in &per_thread {
        for (name, c) in names {
            let rows = stored.get(&(*tid, name.clone())).copied().unwrap_or(0);
            assert_eq!(c.3, rows, "{name} on {tid}: stored count");
            *stored_by_name.entry(name.clone()).or_default() += rows;
        }
        let (a, b, m) = (&names["leaf_a"], &names["leaf_b"], &names["mid"]);
        assert_eq!((a.0, b.0, m.0), (calls, calls, calls), "calls on {tid}");
        assert!(
            b.3 >= slow && m.3 >= slow,
            "every slow call stored on {tid}"
        );
        assert!(
            b.3 < calls / 2 && m.3 < calls / 2,
            "most calls filtered out on {tid}"
        );
        // Leaves have nothing nested; mid's own time is its total less theirs.
        assert_eq!((a.2, b.2), (a.1, b.1), "self time of leaves on {tid}");
        assert_eq!(m.1 - m.2, a.1 + b.1, "self time of mid on {tid}");
        assert!(
            b.1 >= (slow * 50_000) as i64,
            "leaf_b's total holds the slow calls"
        );
    }
    // `strobe summary` shows the exact figures whatever the filter kept.
    let rows = summary_csv(&dbs[0], "regions");
    assert_eq!(rows.len(), 3, "{rows:?}");
    for row in &rows {
        let name = row["Name"].as_str();
        assert_eq!(
            row["Instances"],
            (calls * threads as u64).to_string(),
            "{row:?}"
        );
        assert_eq!(row["Stored"], stored_by_name[name].to_string(), "{row:?}");
    }
    // So does the thread table: every region of each thread.
    let rows = summary_csv(&dbs[0], "threads");
    assert_eq!(rows.len(), threads, "{rows:?}");
    for row in &rows {
        assert_eq!(row["Regions"], regions.to_string(), "{row:?}");
    }
}
