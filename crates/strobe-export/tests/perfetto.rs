//! Perfetto output decoded with the crate's own prost messages: nesting,
//! interning, track descriptions, clocks and counts against the databases.

mod fixture;

use std::collections::{HashMap, HashSet};

use prost::Message;
use strobe_db::Profile;
use strobe_export::perfetto::proto::*;
use strobe_export::perfetto::write_perfetto;

/// What the checker found.
#[derive(Default, Debug)]
struct Seen {
    begins: u64,
    instants: u64,
    counters: u64,
    samples: u64,
    processes: Vec<ProcessDescriptor>,
    threads: Vec<ThreadDescriptor>,
    function_names: HashSet<String>,
    flows: u64,
    annotations: HashMap<String, DebugAnnotation>,
    clock_ids: Vec<u32>,
    default_clock: Option<u32>,
    /// Closed slices: (name, duration ns, name of the enclosing slice on
    /// the same track).
    slices: Vec<(String, u64, Option<String>)>,
}

/// Checks every structural rule of a trace and returns what it saw.
fn check_trace(bytes: &[u8]) -> Seen {
    let trace = Trace::decode(bytes).expect("trace decodes with our messages");
    assert!(!trace.packet.is_empty());
    let mut seen = Seen::default();
    let mut described: HashSet<u64> = HashSet::new();
    // Per sequence: defined iids per kind.
    let mut defined: HashMap<u32, HashMap<&'static str, HashSet<u64>>> = HashMap::new();
    let mut seq_started: HashSet<u32> = HashSet::new();
    let mut open: HashMap<u64, Vec<(u64, String)>> = HashMap::new();
    // Per sequence: event name iid -> name.
    let mut names: HashMap<u32, HashMap<u64, String>> = HashMap::new();
    let mut last_ts: HashMap<u64, u64> = HashMap::new();
    for (k, p) in trace.packet.iter().enumerate() {
        let seq = p
            .trusted_packet_sequence_id
            .expect("every packet names its sequence");
        let flags = p.sequence_flags.unwrap_or(0);
        if flags & SEQ_INCREMENTAL_STATE_CLEARED != 0 {
            defined.insert(seq, HashMap::new());
            names.insert(seq, HashMap::new());
            seq_started.insert(seq);
            if let Some(d) = &p.trace_packet_defaults {
                seen.default_clock = d.timestamp_clock_id;
            }
        }
        let uses_interning =
            p.track_event.is_some() || p.perf_sample.is_some() || p.interned_data.is_some();
        if uses_interning {
            assert!(
                seq_started.contains(&seq),
                "packet {k} uses interning before its sequence cleared its state"
            );
            assert!(
                flags & SEQ_NEEDS_INCREMENTAL_STATE != 0,
                "packet {k} lacks SEQ_NEEDS_INCREMENTAL_STATE"
            );
        }
        let defs = defined.entry(seq).or_default();
        if let Some(i) = &p.interned_data {
            let mut def = |kind: &'static str, iid: Option<u64>| {
                let iid = iid.expect("interned entry has an iid");
                assert_ne!(iid, 0, "iid 0 is invalid");
                defs.entry(kind).or_default().insert(iid);
            };
            for n in &i.event_names {
                def("name", n.iid);
                names
                    .entry(seq)
                    .or_default()
                    .insert(n.iid.unwrap(), n.name.clone().unwrap_or_default());
            }
            for c in &i.event_categories {
                def("cat", c.iid);
            }
            for f in &i.function_names {
                def("func", f.iid);
                seen.function_names
                    .insert(String::from_utf8(f.str.clone().unwrap()).unwrap());
            }
            for b in &i.build_ids {
                def("build", b.iid);
            }
            for m in &i.mapping_paths {
                def("path", m.iid);
            }
            for m in &i.mappings {
                def("mapping", m.iid);
            }
            for f in &i.frames {
                def("frame", f.iid);
            }
            for c in &i.callstacks {
                def("callstack", c.iid);
            }
            let has = |defs: &HashMap<&str, HashSet<u64>>, kind: &str, iid: u64| {
                defs.get(kind).is_some_and(|s| s.contains(&iid))
            };
            for m in &i.mappings {
                for pth in &m.path_string_ids {
                    assert!(has(defs, "path", *pth), "mapping path {pth} undefined");
                }
                if let Some(b) = m.build_id {
                    assert!(has(defs, "build", b), "build id {b} undefined");
                }
            }
            for f in &i.frames {
                assert!(
                    has(defs, "func", f.function_name_id.unwrap()),
                    "frame's function name undefined"
                );
                if let Some(m) = f.mapping_id {
                    assert!(has(defs, "mapping", m), "frame's mapping undefined");
                }
            }
            for c in &i.callstacks {
                assert!(!c.frame_ids.is_empty());
                for fr in &c.frame_ids {
                    assert!(has(defs, "frame", *fr), "callstack frame {fr} undefined");
                }
            }
        }
        if let Some(c) = &p.clock_snapshot {
            seen.clock_ids = c.clocks.iter().filter_map(|c| c.clock_id).collect();
        }
        if let Some(d) = &p.track_descriptor {
            let uuid = d.uuid.expect("descriptor uuid");
            if let Some(parent) = d.parent_uuid {
                assert!(
                    described.contains(&parent),
                    "track {uuid} names an undescribed parent {parent}"
                );
            }
            described.insert(uuid);
            if let Some(pr) = &d.process {
                seen.processes.push(pr.clone());
            }
            if let Some(t) = &d.thread {
                seen.threads.push(t.clone());
            }
        }
        if let Some(ps) = &p.perf_sample {
            seen.samples += 1;
            assert!(p.timestamp.is_some());
            let cs = ps.callstack_iid.expect("samples carry a callstack");
            assert!(
                defs.get("callstack").is_some_and(|s| s.contains(&cs)),
                "callstack {cs} used before defined"
            );
            assert!(ps.pid.is_some() && ps.tid.is_some());
        }
        if let Some(ev) = &p.track_event {
            let ts = p.timestamp.expect("track events have timestamps");
            let track = ev.track_uuid.expect("events name a track");
            assert!(
                described.contains(&track),
                "event on undescribed track {track}"
            );
            let prev = last_ts.insert(track, ts).unwrap_or(0);
            assert!(ts >= prev, "events of track {track} out of order");
            if let Some(n) = ev.name_iid {
                assert!(
                    defs.get("name").is_some_and(|s| s.contains(&n)),
                    "name iid {n} used before defined"
                );
            }
            for c in &ev.category_iids {
                assert!(
                    defs.get("cat").is_some_and(|s| s.contains(c)),
                    "category iid {c} used before defined"
                );
            }
            for a in &ev.debug_annotations {
                seen.annotations.insert(a.name.clone().unwrap(), a.clone());
            }
            seen.flows += ev.flow_ids.len() as u64;
            match ev.r#type {
                Some(TYPE_SLICE_BEGIN) => {
                    let n = ev.name_iid.expect("slices are named");
                    let name = names[&seq][&n].clone();
                    open.entry(track).or_default().push((ts, name));
                    seen.begins += 1;
                }
                Some(TYPE_SLICE_END) => {
                    let stack = open.get_mut(&track);
                    let (b, name) = stack
                        .and_then(|s| s.pop())
                        .expect("END without BEGIN on its track");
                    assert!(ts >= b, "END before its BEGIN");
                    let parent = open[&track].last().map(|(_, n)| n.clone());
                    seen.slices.push((name, ts - b, parent));
                }
                Some(TYPE_INSTANT) => seen.instants += 1,
                Some(TYPE_COUNTER) => {
                    assert!(ev.double_counter_value.is_some());
                    seen.counters += 1;
                }
                other => panic!("unexpected event type {other:?}"),
            }
        }
    }
    for (t, s) in &open {
        assert!(s.is_empty(), "track {t} has {} BEGINs without END", s.len());
    }
    seen
}

#[test]
fn many_processes_one_trace() {
    let dir = tempfile::tempdir().unwrap();
    let (files, exp) = fixture::three_processes(dir.path(), 40);
    let p = Profile::open_files(&files).unwrap();
    let mut out = Vec::new();
    let stats = write_perfetto(&p, &mut out).unwrap();
    let seen = check_trace(&out);
    // Regions and off-CPU samples are slices; on-CPU samples (CPU-time and
    // wall-clock) are PerfSamples.
    assert_eq!(seen.begins, exp.regions + exp.off_cpu_samples);
    assert_eq!(seen.instants, exp.markers);
    assert_eq!(seen.counters, exp.counters);
    // Every timer sample is a PerfSample, wall-clock ones included.
    assert_eq!(seen.samples, exp.samples + exp.wall_samples);
    assert_eq!(stats.slices, exp.regions);
    assert_eq!(stats.samples, exp.samples + exp.wall_samples);
    assert_eq!(stats.off_cpu_slices, exp.off_cpu_samples);
    assert_eq!(
        stats.events,
        2 * (exp.regions + exp.off_cpu_samples)
            + exp.markers
            + exp.counters
            + exp.samples
            + exp.wall_samples
    );
    assert_eq!(seen.processes.len(), 3);
    let pids: HashSet<i32> = seen.processes.iter().map(|p| p.pid.unwrap()).collect();
    assert_eq!(pids, HashSet::from([1000, 2000, 3000]));
    for pr in &seen.processes {
        assert_eq!(pr.cmdline[0], "/opt/app/bin/solver");
        assert!(pr.process_name.as_deref().unwrap().starts_with("solver"));
    }
    assert_eq!(seen.threads.len() as u64, exp.threads);
    assert!(seen
        .threads
        .iter()
        .any(|t| t.thread_name.as_deref() == Some("worker-2")));
    assert!(seen.function_names.contains(fixture::HOT));
    assert!(
        seen.function_names
            .iter()
            .any(|f| f.starts_with("libm.so.6+0x")),
        "unsymbolized frames are named module+0xoffset"
    );
    // io regions carry flows (correlation ids).
    assert_eq!(seen.flows, 3 * 3 * 40);
    let it = &seen.annotations["iteration"];
    assert!(it.int_value.is_some());
    assert!(seen.annotations["ratio"].double_value.is_some());
    assert!(seen.annotations["phase"]
        .string_value
        .as_deref()
        .unwrap()
        .contains("fast"));
    assert_eq!(seen.default_clock, Some(CLOCK_MONOTONIC));
    assert!(seen.clock_ids.contains(&CLOCK_MONOTONIC) && seen.clock_ids.contains(&CLOCK_BOOTTIME));
}

#[test]
fn window_restricts_the_trace() {
    let dir = tempfile::tempdir().unwrap();
    let (files, exp) = fixture::three_processes(dir.path(), 40);
    let mut p = Profile::open_files(&files[..1]).unwrap();
    p.set_window(
        Some(strobe_db::TimeBound::Percent(0.0)),
        Some(strobe_db::TimeBound::Percent(30.0)),
    )
    .unwrap();
    let mut out = Vec::new();
    write_perfetto(&p, &mut out).unwrap();
    let seen = check_trace(&out);
    assert!(seen.begins > 0 && seen.begins < (exp.regions + exp.off_cpu_samples) / 3);
    assert!(seen.samples > 0 && seen.samples < exp.samples / 3);
}

#[test]
fn interning_restarts_keep_the_trace_valid() {
    // Many distinct region names force at least one incremental-state reset.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("names.db");
    let mut w = strobe_db::Writer::create(
        &path,
        &strobe_db::ProcessInfo {
            pid: 9,
            ppid: 1,
            init_ns: 1,
            start_ns: 1,
            start_unix_ns: 1_763_000_000_000_000_000,
            command: "names".into(),
            environment: vec![],
        },
        strobe_db::WriterOptions::default(),
    )
    .unwrap();
    let th = w
        .add_thread(&strobe_db::ThreadInfo {
            tid: 9,
            name: Some("main"),
            start_ns: Some(1),
        })
        .unwrap();
    let n = 210_000u64;
    for i in 0..n {
        let name = w.intern_string(&format!("region-{i}")).unwrap();
        w.append_region(&strobe_db::Region {
            thread: th,
            start_ns: 10 + i * 10,
            end_ns: 15 + i * 10,
            name,
            category: None,
            stack: None,
            correlation_id: None,
            args: &[],
        })
        .unwrap();
    }
    w.finish(10 + n * 10).unwrap();
    let p = Profile::open_files(&[path]).unwrap();
    let mut out = Vec::new();
    write_perfetto(&p, &mut out).unwrap();
    let trace = Trace::decode(&out[..]).unwrap();
    let resets = trace
        .packet
        .iter()
        .filter(|p| p.sequence_flags.unwrap_or(0) & SEQ_INCREMENTAL_STATE_CLEARED != 0)
        .count();
    assert!(
        resets >= 2,
        "expected a restart of the interning state, saw {resets}"
    );
    let seen = check_trace(&out);
    assert_eq!(seen.begins, n);
}

#[test]
fn more_processes_than_reader_threads() {
    // Nine processes: region streams share the profile's connection
    // instead of one reader thread each; the trace must be just as valid.
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    let mut exp = fixture::Expected::default();
    for k in 0..9u32 {
        let f = dir.path().join(format!("p{k}.db"));
        exp.add(&fixture::write_process(
            &f,
            100 + k * 10,
            if k % 2 == 0 { "node-a" } else { "node-b" },
            5,
            5,
        ));
        files.push(f);
    }
    let p = Profile::open_files(&files).unwrap();
    let mut out = Vec::new();
    write_perfetto(&p, &mut out).unwrap();
    let seen = check_trace(&out);
    assert_eq!(seen.begins, exp.regions + exp.off_cpu_samples);
    assert_eq!(seen.instants, exp.markers);
    // Every timer sample is a PerfSample, wall-clock ones included.
    assert_eq!(seen.samples, exp.samples + exp.wall_samples);
    assert_eq!(seen.counters, exp.counters);
    assert_eq!(seen.processes.len(), 9);
    assert!(seen.annotations.contains_key("iteration"));
}

#[test]
fn off_cpu_samples_are_slices_over_the_blocked_time() {
    let dir = tempfile::tempdir().unwrap();
    let (files, exp) = fixture::three_processes(dir.path(), 40);
    let p = Profile::open_files(&files).unwrap();
    let mut out = Vec::new();
    write_perfetto(&p, &mut out).unwrap();
    let seen = check_trace(&out);
    let name = format!("off-CPU: {}", fixture::BLOCKED);
    let off: Vec<&(String, u64, Option<String>)> = seen
        .slices
        .iter()
        .filter(|s| s.0.starts_with("off-CPU"))
        .collect();
    assert_eq!(off.len() as u64, exp.off_cpu_samples);
    assert!(
        off.iter().all(|s| s.0 == name),
        "named after the innermost function"
    );
    // Durations are the weights (1 or 2 µs), and each slice sits inside the
    // io region it blocked in.
    let mut got: Vec<u64> = off.iter().map(|s| s.1).collect();
    let mut want: Vec<u64> = exp.off_cpu.iter().map(|(_, w)| *w).collect();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want);
    assert_eq!(got.iter().sum::<u64>(), exp.off_cpu_ns);
    assert!(
        off.iter().all(|s| s.2.as_deref() == Some("io")),
        "nested in io: {:?}",
        off.iter().find(|s| s.2.as_deref() != Some("io"))
    );
    // The region slices are unchanged.
    assert_eq!(
        seen.slices.iter().filter(|s| s.0 == "io").count() as u64,
        3 * 3 * 40
    );
}

#[test]
fn off_cpu_sample_without_a_stack_is_still_a_slice() {
    use strobe_export::perfetto::PerfettoWriter;
    let mut w = PerfettoWriter::new(Vec::new(), HashMap::new(), Vec::new(), 0).unwrap();
    w.process(&strobe_db::visit::ProcessRow {
        guid: "g".into(),
        pid: 7,
        ppid: 1,
        command: "app".into(),
        machine_id: "m".into(),
        hostname: String::new(),
        start: Some(0),
        ..Default::default()
    })
    .unwrap();
    let sample = |kind: &str, timestamp: i64, weight_ns: u64| strobe_db::SampleRow {
        guid: "g".into(),
        pid: 7,
        tid: 8,
        timestamp,
        track: None,
        stack_id: None,
        kind: kind.into(),
        weight_ns,
        frames: Vec::new(),
    };
    w.sample(&sample("off_cpu", 100, 5_000)).unwrap();
    w.sample(&sample("sample", 200, 1_000_000)).unwrap();
    w.sample(&sample("wall_sample", 300, 1_000_000)).unwrap();
    let (stats, out) = w.finish().unwrap();
    assert_eq!((stats.samples, stats.off_cpu_slices), (2, 1));
    let seen = check_trace_allowing_no_stack(&out);
    assert_eq!(seen, vec![("off-CPU: [no stack]".to_string(), 100, 5_100)]);
}

/// The slices of a trace whose samples may lack a call stack: (name,
/// begin, end).
fn check_trace_allowing_no_stack(bytes: &[u8]) -> Vec<(String, u64, u64)> {
    let trace = Trace::decode(bytes).unwrap();
    let mut names: HashMap<u64, String> = HashMap::new();
    let mut open: Vec<(String, u64)> = Vec::new();
    let mut out = Vec::new();
    for p in &trace.packet {
        if let Some(i) = &p.interned_data {
            for n in &i.event_names {
                names.insert(n.iid.unwrap(), n.name.clone().unwrap());
            }
        }
        if let Some(ev) = &p.track_event {
            let ts = p.timestamp.unwrap();
            match ev.r#type {
                Some(TYPE_SLICE_BEGIN) => open.push((names[&ev.name_iid.unwrap()].clone(), ts)),
                Some(TYPE_SLICE_END) => {
                    let (n, b) = open.pop().unwrap();
                    out.push((n, b, ts));
                }
                other => panic!("unexpected event {other:?}"),
            }
        }
    }
    out
}
