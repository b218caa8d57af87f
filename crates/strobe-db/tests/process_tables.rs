//! One process's tables read back through `process_tables` (what the
//! Parquet export reads) and the lookups beside it: MPI settings, clock
//! comparisons, the bytes of the sample tables.

mod common;

use strobe_db::process_tables::{ArgJoin, RegionsRead};
use strobe_db::{ClockSync, Profile, SampleKind, ThreadInfo, Writer};

fn small() -> (tempfile::TempDir, Profile) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    common::write_small(&path, 300);
    let p = Profile::open(&[path.to_str().unwrap()]).unwrap();
    (dir, p)
}

#[test]
fn a_process_reads_back_its_threads_regions_and_strings() {
    let (_dir, p) = small();
    let sources = p.process_sources();
    assert_eq!(sources.len(), 1);
    let t = sources[0].open((None, None)).unwrap();
    let mut threads = Vec::new();
    assert!(t
        .threads(|th| -> strobe_db::Result<bool> {
            threads.push((th.tid, th.name.clone()));
            Ok(true)
        })
        .unwrap());
    assert_eq!(
        threads,
        [
            (300, Some("main".to_string())),
            (301, Some("worker".to_string()))
        ]
    );
    let mut regions = Vec::new();
    let read = t
        .regions(ArgJoin::Storage, |r| -> strobe_db::Result<bool> {
            let args: Vec<_> = r
                .args
                .iter()
                .map(|a| (a.name.clone(), a.value.clone()))
                .collect();
            regions.push((
                t.string(r.name_id)?,
                r.tid,
                r.end - r.start,
                r.correlation_id,
                args,
            ));
            Ok(true)
        })
        .unwrap();
    assert_eq!(read, RegionsRead::Complete);
    assert_eq!(regions.len(), 5);
    assert_eq!(
        regions[0],
        (
            "compute".into(),
            300,
            10,
            None,
            vec![("n".into(), "7".into())]
        )
    );
    assert_eq!(regions[4], ("io".into(), 301, 100, Some(9), vec![]));
    // The sorted join reads the same regions in event order.
    let mut sorted = 0;
    t.regions(ArgJoin::Sorted, |_| -> strobe_db::Result<bool> {
        sorted += 1;
        Ok(sorted < 2)
    })
    .map(|r| assert_eq!(r, RegionsRead::Stopped))
    .unwrap();
    assert_eq!(t.string(-5).unwrap(), "");
}

#[test]
fn samples_stacks_and_counters_read_by_row_range() {
    let (_dir, p) = small();
    let src = &p.process_sources()[0];
    let bounds = p.row_id_bounds(src).unwrap();
    assert_eq!(bounds.samples, (1, 6));
    assert_eq!(bounds.regions, (1, 5));
    assert_eq!(bounds.counters, (1, 3));
    let t = src.open((None, None)).unwrap();
    let mut scan = t.sample_scan(SampleKind::Cpu).unwrap();
    let mut samples = Vec::new();
    // Two half-open ranges give every sample once.
    for rows in [(Some(1), Some(4)), (Some(4), None)] {
        scan.read(&t, rows, |s| -> strobe_db::Result<bool> {
            samples.push(*s);
            Ok(true)
        })
        .unwrap();
    }
    assert_eq!(samples.len(), 6);
    assert!(samples
        .iter()
        .all(|s| s.kind == SampleKind::Cpu && s.pid == 300));
    let leaf = t.leaf(samples[0].stack_id).unwrap().unwrap();
    assert_eq!(leaf.display_name(), "prog+0x30");
    assert_eq!(t.leaf(999_999).unwrap(), None);
    let walk = t.stack_walk().unwrap().expect("call sites");
    let mut depths = std::collections::BTreeMap::new();
    walk.each(&t, |stack, depth, _frame| -> strobe_db::Result<bool> {
        depths.insert(stack, depth + 1);
        Ok(true)
    })
    .unwrap();
    // By stack id: `main` alone (its root call site) first.
    assert_eq!(depths.values().copied().collect::<Vec<_>>(), [1, 3, 3]);
    let mut frames = 0;
    t.frames(|_| frames += 1).unwrap();
    assert_eq!(frames, 4);
    let counters = t.counter_scan().unwrap();
    assert_eq!(counters.counters().len(), 1);
    assert_eq!(counters.counters()[0].name, "task-clock");
    let mut values = Vec::new();
    counters
        .read(&t, (None, None), |v| -> strobe_db::Result<bool> {
            values.push((v.tid, v.timestamp, v.value));
            Ok(true)
        })
        .unwrap();
    assert_eq!(
        values,
        [
            (Some(300), 2_000, Some(0.0)),
            (Some(300), 2_050, Some(1000.0)),
            (Some(300), 2_100, Some(2000.0))
        ]
    );
    // A window keeps what overlaps it.
    let w = src.open((Some(2_030), Some(2_060))).unwrap();
    let mut n = 0;
    w.sample_scan(SampleKind::Cpu)
        .unwrap()
        .read(&w, (None, None), |_| -> strobe_db::Result<bool> {
            n += 1;
            Ok(true)
        })
        .unwrap();
    assert_eq!(n, 3);
}

#[test]
fn mpi_settings_clock_comparisons_and_sample_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let mut w = Writer::create(&path, &common::process(77), common::opts()).unwrap();
    w.add_thread(&ThreadInfo {
        tid: 77,
        name: None,
        start_ns: Some(1_000),
    })
    .unwrap();
    w.add_setting("mpi.rank", " 1").unwrap();
    w.add_setting("mpi.world_size", "2").unwrap();
    for (phase, local, offset) in [("init", 1_000u64, -50i64), ("finalize", 9_000, -70)] {
        w.clock_sync(&ClockSync {
            phase,
            local_ns: local,
            offset_ns: offset,
            rtt_ns: 400,
            reference_rank: 0,
        })
        .unwrap();
    }
    w.finish(10_000).unwrap();
    let p = Profile::open(&[path.to_str().unwrap()]).unwrap();
    let settings = p.mpi_settings().unwrap();
    let guid = &p.process_sources()[0].guid;
    assert_eq!(settings[guid]["mpi.rank"], " 1");
    assert_eq!(settings[guid]["mpi.world_size"], "2");
    let points = p.clock_sync_points().unwrap();
    let got: Vec<_> = points
        .iter()
        .map(|c| (c.phase.as_str(), c.local_ns, c.offset_ns, c.rtt_ns))
        .collect();
    assert_eq!(
        got,
        [("init", 1_000, -50, 400), ("finalize", 9_000, -70, 400)]
    );
    assert!(p.sample_table_bytes().unwrap().unwrap() > 0);
}
