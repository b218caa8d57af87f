//! Helpers shared by the integration tests: writing small real profiles.
#![allow(dead_code)]

use std::path::Path;

use strobe_db::{
    Arg, NodeInfo, ProcessInfo, Region, StackFrame, ThreadInfo, Writer, WriterOptions,
};

pub fn node() -> NodeInfo {
    NodeInfo {
        machine_id: "test-machine".into(),
        system_name: "Linux".into(),
        hostname: "testhost".into(),
        release: "6.0".into(),
        version: "#1".into(),
        hardware_name: "x86_64".into(),
        domain_name: "(none)".into(),
    }
}

pub fn process(pid: u32) -> ProcessInfo {
    ProcessInfo {
        pid,
        ppid: 1,
        init_ns: 1_000,
        start_ns: 1_000,
        start_unix_ns: 1_700_000_000_000_000_000 + u64::from(pid),
        command: format!("prog --rank {pid}"),
        environment: vec![("OMP_NUM_THREADS".into(), "4".into())],
    }
}

pub fn opts() -> WriterOptions {
    WriterOptions {
        node: Some(node()),
        ..WriterOptions::default()
    }
}

/// A small profile: 2 threads, regions "compute" (10, 20, 30, 40 ns on
/// thread 1) and "io" (100 ns on thread 2), 6 samples with stacks
/// main→work→leaf_a (3), main→work→leaf_b (2), main (1).
pub fn write_small(path: &Path, pid: u32) -> (u64, u64) {
    let mut w = Writer::create(path, &process(pid), opts()).unwrap();
    let t1 = w
        .add_thread(&ThreadInfo {
            tid: pid,
            name: Some("main"),
            start_ns: Some(1_000),
        })
        .unwrap();
    let t2 = w
        .add_thread(&ThreadInfo {
            tid: pid + 1,
            name: Some("worker"),
            start_ns: Some(1_500),
        })
        .unwrap();
    let compute = w.intern_string("compute").unwrap();
    let io = w.intern_string("io").unwrap();
    let user = w.intern_string("user").unwrap();
    let mut t = 2_000u64;
    for d in [10u64, 20, 30, 40] {
        w.append_region(&Region {
            thread: t1,
            start_ns: t,
            end_ns: t + d,
            name: compute,
            category: Some(user),
            stack: None,
            correlation_id: None,
            args: &[Arg {
                name: "n",
                ty: "int",
                value: "7",
            }],
        })
        .unwrap();
        t += 100;
    }
    w.append_region(&Region {
        thread: t2,
        start_ns: 2_050,
        end_ns: 2_150,
        name: io,
        category: Some(user),
        stack: None,
        correlation_id: Some(9),
        args: &[],
    })
    .unwrap();
    let m = w
        .add_module(&strobe_db::ModuleRow {
            path: "/usr/bin/prog",
            build_id: Some("abcd"),
            load_address: 0x400000,
            size: 0x1000,
            file_offset: 0,
            load_ns: Some(1_000),
        })
        .unwrap();
    let f = |pc| StackFrame {
        module: Some(m),
        rel_pc: pc,
    };
    let main = f(0x10);
    let work = f(0x20);
    let leaf_a = f(0x30);
    let leaf_b = f(0x40);
    let track1 = w.add_track(Some(t1), "cpu samples").unwrap();
    let track2 = w.add_track(Some(t2), "cpu samples").unwrap();
    let stacks: [(&[StackFrame], strobe_db::TrackId); 6] = [
        (&[leaf_a, work, main], track1),
        (&[leaf_a, work, main], track1),
        (&[leaf_b, work, main], track2),
        (&[leaf_a, work, main], track1),
        (&[leaf_b, work, main], track1),
        (&[main], track2),
    ];
    for (k, (s, tr)) in stacks.iter().enumerate() {
        w.append_sample(
            *tr,
            strobe_db::SampleMeta::cpu(2_000 + 10 * k as u64, 1_000_000),
            s,
        )
        .unwrap();
    }
    let c = w
        .add_counter(&strobe_db::CounterInfo {
            name: "task-clock",
            units: Some("ns"),
            accumulating: true,
            ..Default::default()
        })
        .unwrap();
    for k in 0..3u64 {
        w.append_counter_sample(c, Some(track1), 2_000 + k * 50, (k * 1000) as f64)
            .unwrap();
    }
    w.finish(3_000).unwrap();
    (2_000, 3_000)
}
