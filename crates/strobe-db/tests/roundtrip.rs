//! Writer → reader round trips through the streaming iterators, the
//! symbolization update, and the writer's bounded-memory structure.

mod common;

use std::time::Duration;

use strobe_db::{FrameSymbols, Profile, StackFrame, ThreadInfo, Writer, WriterOptions};

#[test]
fn regions_samples_counters_threads_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    common::write_small(&path, 300);
    let p = Profile::open(&[path.to_str().unwrap()]).unwrap();

    let regions: Vec<_> = p.regions().unwrap().map(Result::unwrap).collect();
    assert_eq!(regions.len(), 5);
    let starts: Vec<i64> = regions.iter().map(|r| r.start).collect();
    assert!(
        starts.windows(2).all(|w| w[0] <= w[1]),
        "time ordered: {starts:?}"
    );
    assert_eq!(regions[0].name, "compute");
    assert_eq!(
        (
            regions[0].pid,
            regions[0].tid,
            regions[0].end - regions[0].start
        ),
        (300, 300, 10)
    );
    assert_eq!(regions[1].name, "io");
    assert_eq!(regions[1].tid, 301);
    assert_eq!(regions[1].category.as_deref(), Some("user"));

    let samples: Vec<_> = p.samples().unwrap().map(Result::unwrap).collect();
    assert_eq!(samples.len(), 6);
    assert!(samples.windows(2).all(|w| w[0].timestamp <= w[1].timestamp));
    let pcs: Vec<u64> = samples[0].frames.iter().map(|f| f.rel_pc).collect();
    assert_eq!(pcs, vec![0x30, 0x20, 0x10], "leaf first");
    assert_eq!(
        samples[0].frames[0].module.as_deref(),
        Some("/usr/bin/prog")
    );
    assert_eq!(samples[0].frames[0].display_name(), "prog+0x30");
    assert_eq!(samples[2].tid, 301);
    assert_eq!(samples[5].frames.len(), 1);

    let counters: Vec<_> = p.counters().unwrap().map(Result::unwrap).collect();
    assert_eq!(
        counters.iter().map(|c| c.value).collect::<Vec<_>>(),
        vec![0.0, 1000.0, 2000.0]
    );
    assert_eq!(counters[0].tid, Some(300));
    assert_eq!(counters[0].units.as_deref(), Some("ns"));

    let threads: Vec<_> = p.threads().unwrap().map(Result::unwrap).collect();
    assert_eq!(threads.len(), 2);
    assert_eq!(threads[0].name.as_deref(), Some("main"));
    assert_eq!(threads[0].end, Some(3_000), "finish() closes open threads");
}

#[test]
fn symbolization_updates_frames_after_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    common::write_small(&path, 400);
    let frames = strobe_db::symbols::unsymbolized_frames(&path).unwrap();
    assert_eq!(frames.len(), 4);
    assert!(frames
        .iter()
        .all(|f| f.module_path.as_deref() == Some("/usr/bin/prog")
            && f.build_id.as_deref() == Some("abcd")));
    let leaf = frames.iter().find(|f| f.rel_pc == 0x30).unwrap();
    strobe_db::symbols::set_frame_symbols(
        &path,
        &leaf.suffix,
        &[FrameSymbols {
            frame: leaf.frame,
            function: Some("leaf_a"),
            file: Some("a.c"),
            line: Some(12),
        }],
    )
    .unwrap();
    assert_eq!(
        strobe_db::symbols::unsymbolized_frames(&path)
            .unwrap()
            .len(),
        3
    );
    let p = Profile::open(&[path.to_str().unwrap()]).unwrap();
    let s = p.samples().unwrap().next().unwrap().unwrap();
    assert_eq!(s.frames[0].display_name(), "leaf_a");
    assert_eq!(s.frames[0].line, Some(12));
}

#[test]
fn memory_structure_is_bounded_by_distinct_values_and_batch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.db");
    let opts = WriterOptions {
        batch_rows: 500,
        flush_interval: Duration::from_secs(3600),
        ..common::opts()
    };
    let mut w = Writer::create(&path, &common::process(7), opts).unwrap();
    let t = w
        .add_thread(&ThreadInfo {
            tid: 7,
            name: None,
            start_ns: Some(0),
        })
        .unwrap();
    let track = w.add_track(Some(t), "cpu").unwrap();
    let m = w
        .add_module(&strobe_db::ModuleRow {
            path: "/lib/x.so",
            size: 4096,
            ..Default::default()
        })
        .unwrap();
    let stacks: Vec<Vec<StackFrame>> = (0..8u64)
        .map(|k| {
            (0..=k)
                .map(|d| StackFrame {
                    module: Some(m),
                    rel_pc: 0x100 + d * 16 + (k % 2),
                })
                .collect()
        })
        .collect();
    let mut sizes = Vec::new();
    let mut max_pending = 0;
    for round in 0..4u64 {
        for k in 0..5_000u64 {
            w.append_sample(
                track,
                strobe_db::SampleMeta::cpu(round * 10_000 + k, 1_000_000),
                &stacks[(k % 8) as usize],
            )
            .unwrap();
            max_pending = max_pending.max(w.pending_rows());
        }
        sizes.push(w.cache_sizes());
    }
    // Interning caches stop growing once every distinct value was seen.
    assert_eq!(sizes[1], sizes[3]);
    assert!(sizes[3].2 <= 64, "call sites: {:?}", sizes[3]);
    // Uncommitted rows never exceed one batch.
    assert!(max_pending < 500, "pending {max_pending}");
    // 20 000 sample rows (samples of a known stack share their event row)
    // in batches of at most 500 rows.
    assert!(w.totals().commits >= 40);
    let totals = w.finish(100_000).unwrap();
    assert_eq!(totals.samples, 20_000);
    let p = Profile::open(&[path.to_str().unwrap()]).unwrap();
    assert_eq!(p.samples().unwrap().count(), 20_000);
}

#[test]
fn flushed_rows_are_visible_to_another_connection_while_writing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.db");
    let opts = WriterOptions {
        flush_interval: Duration::from_millis(0),
        ..common::opts()
    };
    let mut w = Writer::create(&path, &common::process(8), opts).unwrap();
    let t = w
        .add_thread(&ThreadInfo {
            tid: 8,
            name: None,
            start_ns: None,
        })
        .unwrap();
    let name = w.intern_string("r").unwrap();
    for k in 0..10u64 {
        w.append_region(&strobe_db::Region {
            thread: t,
            start_ns: k,
            end_ns: k + 1,
            name,
            category: None,
            stack: None,
            correlation_id: None,
            args: &[],
        })
        .unwrap();
    }
    w.flush().unwrap();
    let p = Profile::open(&[path.to_str().unwrap()]).unwrap();
    assert_eq!(p.regions().unwrap().count(), 10);
    drop(p);
    w.finish(20).unwrap();
}

#[test]
fn writer_moves_to_a_dedicated_thread_and_records_memory_ops() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mem.db");
    let w = Writer::create(&path, &common::process(9), common::opts()).unwrap();
    let handle = std::thread::spawn(move || {
        let mut w = w;
        let t = w
            .add_thread(&ThreadInfo {
                tid: 9,
                name: Some("main"),
                start_ns: Some(0),
            })
            .unwrap();
        let cpu = w
            .add_agent(&strobe_db::AgentInfo {
                kind: strobe_db::AgentKind::Cpu,
                absolute_index: 0,
                logical_index: 0,
                type_index: 0,
                name: "cpu0",
                model_name: Some("test cpu"),
                vendor_name: None,
                product_name: None,
            })
            .unwrap();
        let malloc = w.intern_string("malloc").unwrap();
        let m = w
            .add_module(&strobe_db::ModuleRow {
                path: "/lib/libplugin.so",
                size: 10,
                ..Default::default()
            })
            .unwrap();
        for (k, op) in [strobe_db::AllocOp::Alloc, strobe_db::AllocOp::Free]
            .into_iter()
            .enumerate()
        {
            w.append_memory_op(&strobe_db::MemoryOp {
                thread: t,
                op,
                level: strobe_db::MemLevel::Real,
                start_ns: 100 + k as u64 * 100,
                end_ns: 150 + k as u64 * 100,
                address: 0xdead_0000,
                size: if k == 0 { 4096 } else { 0 },
                agent: Some(cpu),
                category: Some(malloc),
                stack: None,
            })
            .unwrap();
        }
        w.end_module(m, 250).unwrap();
        w.finish(300).unwrap()
    });
    let totals = handle.join().unwrap();
    assert!(totals.rows >= 7);
    let p = Profile::open(&[path.to_str().unwrap()]).unwrap();
    let rows: Vec<(String, String, i64, i64, String, String, i64)> = p
        .connection()
        .prepare("SELECT type, level, size, duration, agent_name, category, tid FROM memory_allocations ORDER BY start")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(
        rows[0],
        (
            "ALLOC".into(),
            "REAL".into(),
            4096,
            50,
            "cpu0".into(),
            "malloc".into(),
            9
        )
    );
    assert_eq!(rows[1].0, "FREE");
    let unload: i64 = p
        .connection()
        .query_row("SELECT unload_time FROM strobe_module", [], |r| r.get(0))
        .unwrap();
    assert_eq!(unload, 250);
}

#[test]
fn writer_symbolizes_frames_during_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sym.db");
    let mut w = Writer::create(&path, &common::process(12), common::opts()).unwrap();
    let t = w
        .add_thread(&ThreadInfo {
            tid: 12,
            name: None,
            start_ns: Some(0),
        })
        .unwrap();
    let track = w.add_track(Some(t), "cpu").unwrap();
    let m = w
        .add_module(&strobe_db::ModuleRow {
            path: "/bin/x",
            size: 100,
            ..Default::default()
        })
        .unwrap();
    let leaf = StackFrame {
        module: Some(m),
        rel_pc: 0x44,
    };
    w.append_sample(track, strobe_db::SampleMeta::cpu(5, 1_000_000), &[leaf])
        .unwrap();
    let f = w.intern_frame(leaf).unwrap();
    w.set_frame_symbols(&[FrameSymbols {
        frame: f,
        function: Some("hot_loop"),
        file: Some("x.c"),
        line: Some(3),
    }])
    .unwrap();
    w.finish(10).unwrap();
    let p = Profile::open(&[path.to_str().unwrap()]).unwrap();
    let s = p.samples().unwrap().next().unwrap().unwrap();
    assert_eq!(s.frames[0].display_name(), "hot_loop");
    assert_eq!(s.frames[0].file.as_deref(), Some("x.c"));
}

#[test]
fn process_info_describes_this_process() {
    let p = strobe_db::ProcessInfo::current();
    assert_eq!(p.pid, std::process::id());
    assert!(p.ppid > 0);
    assert!(p.start_ns <= p.init_ns && p.init_ns <= strobe_core::clock::now_ns());
    assert!(p.start_unix_ns > 1_600_000_000_000_000_000);
    let exe = std::env::current_exe().unwrap();
    let name = exe.file_name().unwrap().to_str().unwrap();
    assert!(p.command.contains(name), "{} should name {name}", p.command);
}
