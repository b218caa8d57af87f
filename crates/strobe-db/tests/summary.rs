//! Summary numbers checked against values computed by hand from the rows
//! `common::write_small` writes.

mod common;

use strobe_db::summary::{function_summary, region_summary, thread_summary};
use strobe_db::Profile;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

#[test]
fn region_statistics_match_hand_computed_values() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    common::write_small(&path, 77);
    let p = Profile::open(&[path.to_str().unwrap()]).unwrap();
    let rows = region_summary(&p, false).unwrap();
    assert_eq!(rows.len(), 2);
    // compute: 10, 20, 30, 40 ns.  io: 100 ns. Equal totals: name order.
    let c = &rows[0];
    assert_eq!(c.name, "compute");
    assert_eq!(
        (c.total_ns, c.instances, c.min_ns, c.max_ns),
        (100, 4, 10, 40)
    );
    assert!(close(c.avg_ns, 25.0) && close(c.med_ns, 25.0));
    assert!(
        close(c.stddev_ns, (500.0f64 / 3.0).sqrt()),
        "{}",
        c.stddev_ns
    );
    assert!(close(c.time_pct, 50.0));
    let io = &rows[1];
    assert_eq!(
        (io.name.as_str(), io.total_ns, io.instances),
        ("io", 100, 1)
    );
    assert!(close(io.med_ns, 100.0) && close(io.stddev_ns, 0.0) && close(io.time_pct, 50.0));
}

#[test]
fn odd_count_median_and_sorting_by_total() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    let mut w = strobe_db::Writer::create(&path, &common::process(3), common::opts()).unwrap();
    let t = w
        .add_thread(&strobe_db::ThreadInfo {
            tid: 3,
            name: None,
            start_ns: Some(0),
        })
        .unwrap();
    let a = w.intern_string("a").unwrap();
    let b = w.intern_string("b").unwrap();
    let region = |w: &mut strobe_db::Writer, name, s: u64, d: u64| {
        w.append_region(&strobe_db::Region {
            thread: t,
            start_ns: s,
            end_ns: s + d,
            name,
            category: None,
            stack: None,
            correlation_id: None,
            args: &[],
        })
        .unwrap();
    };
    // a: 5, 1, 300 (written out of order) -> total 306, median 5.  b: 50, 50 -> total 100.
    region(&mut w, a, 0, 5);
    region(&mut w, b, 10, 50);
    region(&mut w, a, 20, 1);
    region(&mut w, a, 30, 300);
    region(&mut w, b, 40, 50);
    w.finish(1000).unwrap();
    let p = Profile::open(&[path.to_str().unwrap()]).unwrap();
    let rows = region_summary(&p, false).unwrap();
    assert_eq!(
        rows.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
        vec!["a", "b"]
    );
    assert!(close(rows[0].med_ns, 5.0));
    assert!(close(rows[0].avg_ns, 102.0));
    assert!(close(rows[0].time_pct, 306.0 * 100.0 / 406.0));
    assert!(close(rows[1].stddev_ns, 0.0));
}

#[test]
fn sampled_functions_self_and_inclusive() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    common::write_small(&path, 77);
    let p = Profile::open(&[path.to_str().unwrap()]).unwrap();
    let rows = function_summary(&p, false).unwrap();
    let get = |n: &str| {
        rows.iter()
            .find(|r| r.name == n)
            .unwrap_or_else(|| panic!("{n} in {rows:?}"))
    };
    // 6 samples: leaf_a(0x30) x3, leaf_b(0x40) x2, main(0x10) alone x1; work = 0x20.
    assert_eq!(
        (
            get("prog+0x30").self_samples,
            get("prog+0x30").total_samples
        ),
        (3, 3)
    );
    assert_eq!(
        (
            get("prog+0x40").self_samples,
            get("prog+0x40").total_samples
        ),
        (2, 2)
    );
    assert_eq!(
        (
            get("prog+0x20").self_samples,
            get("prog+0x20").total_samples
        ),
        (0, 5)
    );
    assert_eq!(
        (
            get("prog+0x10").self_samples,
            get("prog+0x10").total_samples
        ),
        (1, 6)
    );
    assert!(close(get("prog+0x30").self_pct, 50.0));
    assert!(close(get("prog+0x10").total_pct, 100.0));
    assert_eq!(rows[0].name, "prog+0x30", "sorted by self samples");

    // After symbolization the function name replaces module+offset.
    drop(p);
    let frames = strobe_db::symbols::unsymbolized_frames(&path).unwrap();
    let f = frames.iter().find(|f| f.rel_pc == 0x20).unwrap();
    strobe_db::symbols::set_frame_symbols(
        &path,
        &f.suffix,
        &[strobe_db::FrameSymbols {
            frame: f.frame,
            function: Some("work"),
            file: None,
            line: None,
        }],
    )
    .unwrap();
    let p = Profile::open(&[path.to_str().unwrap()]).unwrap();
    let rows = function_summary(&p, false).unwrap();
    assert_eq!(
        rows.iter()
            .find(|r| r.name == "work")
            .unwrap()
            .total_samples,
        5
    );
}

#[test]
fn per_thread_and_by_process() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.db");
    let b = dir.path().join("b.db");
    common::write_small(&a, 10);
    common::write_small(&b, 20);
    let p = Profile::open(&[a.to_str().unwrap(), b.to_str().unwrap()]).unwrap();
    let threads = thread_summary(&p, false).unwrap();
    assert_eq!(threads.len(), 4);
    let main10 = threads.iter().find(|t| t.tid == 10).unwrap();
    // main thread: samples 0,1,3,4 on track 1; 4 regions totalling 100 ns.
    assert_eq!(
        (main10.samples, main10.regions, main10.region_total_ns),
        (4, 4, 100)
    );
    assert!(close(main10.sample_pct, 4.0 * 100.0 / 12.0));
    assert_eq!(main10.lifetime_ns, Some(2_000));
    let by = thread_summary(&p, true).unwrap();
    assert!(close(
        by.iter().find(|t| t.tid == 10).unwrap().sample_pct,
        4.0 * 100.0 / 6.0
    ));

    let regions = region_summary(&p, true).unwrap();
    assert_eq!(regions.len(), 4);
    for pid in [10, 20] {
        let share: f64 = regions
            .iter()
            .filter(|r| r.pid == Some(pid))
            .map(|r| r.time_pct)
            .sum();
        assert!(close(share, 100.0));
    }
    let all = region_summary(&p, false).unwrap();
    assert_eq!(all[0].instances, 8);
    let funcs = function_summary(&p, true).unwrap();
    assert_eq!(funcs.iter().filter(|f| f.name == "prog+0x10").count(), 2);
}

#[test]
fn time_window_restricts_views() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    common::write_small(&path, 9);
    let mut p = Profile::open(&[path.to_str().unwrap()]).unwrap();
    // Run: process start 1000 to end 3000. Regions at 2000, 2100, 2200, 2300 (compute) and 2050 (io).
    let (s, e) = p
        .set_window(Some("1150".parse().unwrap()), Some("60%".parse().unwrap()))
        .unwrap();
    assert_eq!((s, e), (Some(2150), Some(2200)));
    let names: Vec<(String, i64)> = p
        .regions()
        .unwrap()
        .map(|r| r.unwrap())
        .map(|r| (r.name, r.start))
        .collect();
    // Overlapping [2150, 2200]: io (2050-2150) and compute at 2200 (2200-2230).
    assert_eq!(
        names,
        vec![("io".to_string(), 2050), ("compute".to_string(), 2200)]
    );
    // Samples at 2000..2050 step 10: none in the window.
    assert_eq!(p.samples().unwrap().count(), 0);
    p.set_window(None, None).unwrap();
    assert_eq!(p.regions().unwrap().count(), 5);
}

#[test]
fn off_cpu_time_is_summed_apart_from_cpu_time_and_shares_follow_weights() {
    use strobe_db::{SampleKind, SampleMeta, StackFrame};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    let mut w = strobe_db::Writer::create(&path, &common::process(5), common::opts()).unwrap();
    let t = w
        .add_thread(&strobe_db::ThreadInfo {
            tid: 5,
            name: None,
            start_ns: Some(0),
        })
        .unwrap();
    let track = w.add_track(Some(t), "samples").unwrap();
    let (outer, busy, wait) = (
        StackFrame {
            module: None,
            rel_pc: 0x10,
        },
        StackFrame {
            module: None,
            rel_pc: 0x20,
        },
        StackFrame {
            module: None,
            rel_pc: 0x30,
        },
    );
    // Two CPU samples in `busy` (1 ms and 3 ms: merged expirations), one
    // in `outer` (4 ms), and 50 ms blocked in `wait`.
    w.append_sample(track, SampleMeta::cpu(10, 1_000_000), &[busy, outer])
        .unwrap();
    w.append_sample(track, SampleMeta::cpu(20, 3_000_000), &[busy, outer])
        .unwrap();
    w.append_sample(track, SampleMeta::cpu(30, 4_000_000), &[outer])
        .unwrap();
    let off = SampleMeta {
        timestamp_ns: 40,
        kind: SampleKind::OffCpu,
        weight_ns: 50_000_000,
    };
    w.append_sample(track, off, &[wait, outer]).unwrap();
    w.finish(100).unwrap();
    let p = Profile::open(&[path.to_str().unwrap()]).unwrap();
    let rows = function_summary(&p, false).unwrap();
    let get = |n: &str| rows.iter().find(|r| r.name == n).unwrap();
    // Wall-clock order: the blocked function first.
    assert_eq!(rows[0].name, "0x30");
    let b = get("0x20");
    assert_eq!((b.self_samples, b.self_ns), (2, 4_000_000));
    assert!(close(b.self_pct, 50.0), "{}", b.self_pct);
    assert_eq!(b.off_cpu_total_ns, 0);
    let o = get("0x10");
    assert_eq!((o.total_samples, o.total_ns), (3, 8_000_000));
    assert!(close(o.total_pct, 100.0));
    assert_eq!(o.off_cpu_total_ns, 50_000_000);
    let wt = get("0x30");
    assert_eq!(
        (wt.self_samples, wt.self_ns, wt.off_cpu_self_ns),
        (0, 0, 50_000_000)
    );
    let threads = thread_summary(&p, false).unwrap();
    assert_eq!(
        (
            threads[0].samples,
            threads[0].sampled_ns,
            threads[0].off_cpu_ns
        ),
        (3, 8_000_000, 50_000_000)
    );
}

#[test]
fn scaling_weights_touches_only_the_given_thread_and_kind() {
    use strobe_db::{SampleKind, SampleMeta, StackFrame};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    let mut w = strobe_db::Writer::create(&path, &common::process(6), common::opts()).unwrap();
    let mut tracks = Vec::new();
    for tid in [6, 7] {
        let t = w
            .add_thread(&strobe_db::ThreadInfo {
                tid,
                name: None,
                start_ns: Some(0),
            })
            .unwrap();
        tracks.push(w.add_track(Some(t), "samples").unwrap());
    }
    let f = StackFrame {
        module: None,
        rel_pc: 0x10,
    };
    for (k, &track) in tracks.iter().enumerate() {
        for n in 0..4u64 {
            w.append_sample(track, SampleMeta::cpu(n + 10 * k as u64, 4_000_000), &[f])
                .unwrap();
        }
        let wall = SampleMeta {
            timestamp_ns: 100,
            kind: SampleKind::Wall,
            weight_ns: 1_000_000,
        };
        w.append_sample(track, wall, &[f]).unwrap();
    }
    // A later sample of thread 6 (the kernel's, after a hand-over) is not
    // the timer's: left alone.
    w.append_sample(tracks[0], SampleMeta::cpu(50, 4_000_000), &[f])
        .unwrap();
    // Thread 6's four CPU samples stood for 7 expirations.
    w.scale_sample_weights(&[strobe_db::WeightScale {
        track: tracks[0],
        kind: SampleKind::Cpu,
        until_ns: 3,
        numerator: 7,
        denominator: 4,
    }])
    .unwrap();
    w.finish(200).unwrap();
    let p = Profile::open(&[path.to_str().unwrap()]).unwrap();
    let rows: Vec<_> = p.samples().unwrap().map(|s| s.unwrap()).collect();
    let sum = |tid: i64, kind: &str| -> u64 {
        rows.iter()
            .filter(|s| s.tid == tid && s.kind == kind)
            .map(|s| s.weight_ns)
            .sum()
    };
    assert_eq!(sum(6, "sample"), 28_000_000 + 4_000_000);
    assert_eq!(sum(7, "sample"), 16_000_000);
    assert_eq!(
        (sum(6, "wall_sample"), sum(7, "wall_sample")),
        (1_000_000, 1_000_000)
    );
}

#[test]
fn counters_point_at_the_cpu_agent_as_rocpd_views_expect() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    let mut w = strobe_db::Writer::create(&path, &common::process(8), common::opts()).unwrap();
    for name in ["peak_rss", "thread_cpu_time"] {
        let c = w
            .add_counter(&strobe_db::CounterInfo {
                name,
                description: None,
                units: None,
                component: None,
                accumulating: false,
                expression: None,
            })
            .unwrap();
        w.append_counter_sample(c, None, 10, 1.0).unwrap();
    }
    w.finish(100).unwrap();
    let p = Profile::open(&[path.to_str().unwrap()]).unwrap();
    // AMD's views join counters to their agent (an inner join).
    let (n, kind): (i64, String) = p
        .connection()
        .query_row(
            "SELECT COUNT(*), MIN(A.type) FROM rocpd_info_pmc P \
             JOIN rocpd_info_agent A ON A.id = P.agent_id AND A.guid = P.guid",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((n, kind.as_str()), (2, "CPU"));
    let agents: i64 = p
        .connection()
        .query_row("SELECT COUNT(*) FROM rocpd_info_agent", [], |r| r.get(0))
        .unwrap();
    assert_eq!(agents, 1, "one CPU agent, however many counters");
}

/// Writes `regions` regions of 5 names on 3 threads of process `pid`, with
/// durations spread over many powers of two (and many equal ones), some
/// regions sharing their category's event and some with events of their
/// own.
fn write_many(path: &std::path::Path, pid: u32, regions: u64, seed: u64) {
    let mut w = strobe_db::Writer::create(path, &common::process(pid), common::opts()).unwrap();
    let threads: Vec<_> = (0..3)
        .map(|k| {
            w.add_thread(&strobe_db::ThreadInfo {
                tid: pid * 10 + k,
                name: None,
                start_ns: Some(0),
            })
            .unwrap()
        })
        .collect();
    let names: Vec<_> = ["alpha", "beta", "gamma", "delta", "epsilon"]
        .iter()
        .map(|n| w.intern_string(n).unwrap())
        .collect();
    let category = w.intern_string("user").unwrap();
    let mut x = seed | 1;
    for k in 0..regions {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let d = match k % 5 {
            0 => 1_000,
            1 => x % 64,
            2 => x % (1 << (x % 40)),
            3 => 1_000_000 + x % 4096,
            _ => x % 10_000_000_000,
        };
        let r = strobe_db::Region {
            thread: threads[(x % 3) as usize],
            start_ns: 1_000 + k * 10,
            end_ns: 1_000 + k * 10 + d,
            name: names[((x >> 8) % 5) as usize],
            category: Some(category),
            stack: None,
            correlation_id: None,
            args: &[],
        };
        if k % 7 == 0 {
            w.append_region(&r).unwrap();
        } else {
            w.append_region_shared(&r).unwrap();
        }
    }
    w.finish(1_000 + regions * 10 + 20_000_000_000).unwrap();
}

#[test]
fn the_region_scan_agrees_with_sql_over_the_regions_view() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.db");
    let b = dir.path().join("b.db");
    write_many(&a, 41, 30_001, 7);
    write_many(&b, 42, 20_000, 11);
    let mut p = Profile::open(&[a.to_str().unwrap(), b.to_str().unwrap()]).unwrap();
    for window in [None, Some((50_000u64, 150_000u64))] {
        if let Some((s, e)) = window {
            p.set_window(
                Some(strobe_db::TimeBound::Ns(s as i64)),
                Some(strobe_db::TimeBound::Ns(e as i64)),
            )
            .unwrap();
        }
        for by_process in [false, true] {
            let scanned = region_summary(&p, by_process).unwrap();
            let by_sql =
                strobe_db::summary::duration_summary(&p, "regions", "name", "duration", by_process)
                    .unwrap();
            assert_eq!(scanned.len(), by_sql.len(), "{window:?} {by_process}");
            assert!(scanned.len() >= 5);
            for (s, q) in scanned.iter().zip(&by_sql) {
                let what = format!("{} ({window:?}, by process {by_process})", q.name);
                assert_eq!(
                    (
                        &s.guid,
                        s.pid,
                        &s.name,
                        s.total_ns,
                        s.instances,
                        s.min_ns,
                        s.max_ns
                    ),
                    (
                        &q.guid,
                        q.pid,
                        &q.name,
                        q.total_ns,
                        q.instances,
                        q.min_ns,
                        q.max_ns
                    ),
                    "{what}"
                );
                assert_eq!(s.med_ns, q.med_ns, "median of {what}");
                assert!(close(s.time_pct, q.time_pct), "{what}");
                assert!(
                    (s.avg_ns - q.avg_ns).abs() <= 1e-9 * q.avg_ns.abs().max(1.0),
                    "{what}"
                );
                // Both compute it from exact integer sums: the same digits.
                assert_eq!(s.stddev_ns, q.stddev_ns, "deviation of {what}");
            }
        }
    }
}
