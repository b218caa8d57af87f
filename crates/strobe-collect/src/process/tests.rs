//! Unit tests of `process.rs`.

use super::*;
use strobe_wire::record::as_bytes;
use strobe_wire::segment::Layout;

const LAYOUT: Layout = Layout {
    slots: 4,
    sample_ring_bytes: 4096,
    event_ring_bytes: 4096,
};

/// A segment of pid 77 whose process information is `info`.
fn segment(info: &[u8]) -> Arc<Segment> {
    let (segment, _fd) = Segment::create(LAYOUT, 77, 1, 0, (0, 0)).unwrap();
    segment.write_info(info);
    Arc::new(segment)
}

/// A process of pid 77 with options writing into `dir`.
fn process(dir: &std::path::Path) -> (Process, Options) {
    (
        Process::new(77, segment(b"")),
        crate::fuzz::options_for(dir),
    )
}

fn module_bytes(body: &ModuleBody, build_id: &[u8], path: &[u8]) -> Vec<u8> {
    let mut bytes = as_bytes(body).to_vec();
    bytes.extend_from_slice(build_id);
    bytes.extend_from_slice(path);
    bytes
}

const LIB: ModuleBody = ModuleBody {
    bias: 0x7000_0000,
    text_start: 0x7000_1000,
    text_end: 0x7000_5000,
    mapped_start: 0x7000_0000,
    mapped_end: 0x7000_9000,
    build_id_len: 3,
    reserved: 0,
};

#[test]
fn an_announced_module_is_kept_once_with_its_build_id_in_hex() {
    let dir = tempfile::tempdir().unwrap();
    let (mut p, options) = process(dir.path());
    let bytes = module_bytes(&LIB, &[0xab, 0x01, 0xff], b"/lib/libx.so");
    p.event(1, event::MODULE, 0, 0, &bytes, &options);
    p.event(1, event::MODULE, 0, 0, &bytes, &options);
    assert_eq!(
        p.modules,
        [Module {
            path: "/lib/libx.so".into(),
            bias: 0x7000_0000,
            text: 0x7000_1000..0x7000_5000,
            mapped: 0x7000_0000..0x7000_9000,
            build_id: "ab01ff".into(),
        }]
    );
    // A build id longer than the record: all of it, and no path.
    let long = ModuleBody {
        build_id_len: 1 << 20,
        text_start: 0x8000_0000,
        text_end: 0x8000_1000,
        ..LIB
    };
    p.event(
        1,
        event::MODULE,
        0,
        0,
        &module_bytes(&long, &[1, 2], b""),
        &options,
    );
    assert_eq!(p.modules[1].build_id, "0102");
    assert_eq!(p.modules[1].path, "");
    assert!(
        std::fs::read_dir(dir.path()).unwrap().next().is_none(),
        "no database"
    );
}

#[test]
fn a_module_that_cannot_be_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (mut p, options) = process(dir.path());
    for bad in [
        ModuleBody {
            text_end: LIB.text_start - 1,
            ..LIB
        },
        ModuleBody {
            bias: LIB.text_start + 1,
            ..LIB
        },
        ModuleBody {
            mapped_end: LIB.mapped_start - 1,
            ..LIB
        },
    ] {
        p.event(
            1,
            event::MODULE,
            0,
            0,
            &module_bytes(&bad, &[1, 2, 3], b"/x"),
            &options,
        );
    }
    // Shorter than a module body.
    let bytes = module_bytes(&LIB, &[], b"");
    p.event(1, event::MODULE, 0, 0, &bytes[..bytes.len() - 1], &options);
    assert!(p.modules.is_empty());
}

#[test]
fn thread_life_strings_and_notes_are_kept_until_a_database_needs_them() {
    let dir = tempfile::tempdir().unwrap();
    let (mut p, options) = process(dir.path());
    p.event(10, event::THREAD_START, 0, 1_000, b"worker", &options);
    let mut end = 5_000_000u64.to_le_bytes().to_vec();
    end.extend_from_slice(b"worker");
    p.event(10, event::THREAD_END, 0, 2_000, &end, &options);
    p.event(11, event::THREAD_END, 0, 2_000, &[1, 2, 3], &options);
    p.event(10, event::STRING, 3, 0, b"compute", &options);
    p.event(10, event::STRING, 4, 0, b"\xffbad utf-8", &options);
    p.event(
        10,
        event::NOTE,
        0,
        0,
        b"counter `x` is not counted",
        &options,
    );
    p.event(10, 999, 0, 0, b"an unknown kind", &options);
    assert_eq!(p.thread_starts[&10], (1_000, "worker".to_string()));
    assert_eq!(p.ended_cpu.get(&10), Some(&5_000_000));
    assert!(!p.ended_cpu.contains_key(&11), "too short for a CPU time");
    assert_eq!(p.strings[&3], "compute");
    assert_eq!(p.strings[&4], "\u{fffd}bad utf-8");
    assert_eq!(p.notes, ["counter `x` is not counted"]);
    assert!(p.profile.is_none());
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
}

#[test]
fn xpti_streams_are_named_and_a_missing_dispatcher_is_remembered_once() {
    let dir = tempfile::tempdir().unwrap();
    let (mut p, options) = process(dir.path());
    p.event(
        1,
        event::XPTI_STREAM,
        0,
        0,
        b"sycl\0no libxptifw.so",
        &options,
    );
    p.event(1, event::XPTI_STREAM, 0, 0, b"ur\0later", &options);
    p.event(1, event::XPTI_STREAM, 0x101, 0, b"sycl.pi", &options);
    assert!(p.xpti_initialized);
    assert_eq!(
        p.xpti_missing,
        Some(("sycl".to_string(), "no libxptifw.so".to_string()))
    );
    assert_eq!(p.xpti_streams[&0x101], "sycl.pi");
    let (mut q, _) = process(dir.path());
    q.event(1, event::XPTI_STREAM, 0, 0, b"no reason given", &options);
    assert_eq!(
        q.xpti_missing,
        Some(("no reason given".to_string(), String::new()))
    );
}

/// Options asking for XPTI notifications (`xpti` and `use_tracing`).
fn xpti_options(dir: &std::path::Path) -> Options {
    let mut options = crate::fuzz::options_for(dir);
    options.settings = vec![
        ("xpti".into(), "true".into()),
        ("use_tracing".into(), "true".into()),
    ];
    options
}

fn sycl_module() -> Module {
    Module {
        path: "/opt/lib/libsycl.so.8".into(),
        bias: 0,
        text: 0..1,
        mapped: 0..1,
        build_id: String::new(),
    }
}

#[test]
fn xpti_asked_for_and_not_recorded_is_explained() {
    let dir = tempfile::tempdir().unwrap();
    let options = xpti_options(dir.path());
    let (mut p, plain) = process(dir.path());
    p.modules.push(sycl_module());
    assert_eq!(p.xpti_note(&plain), None, "not asked for");
    let note = p.xpti_note(&options).unwrap();
    assert!(
        note.starts_with("libsycl.so.8 was loaded with the xpti setting on, but XPTI_SUBSCRIBERS"),
        "{note}"
    );
    p.described.env = vec![(
        "XPTI_SUBSCRIBERS".into(),
        "/opt/strobe/lib/libstrobe_runtime.so".into(),
    )];
    let note = p.xpti_note(&options).unwrap();
    assert!(
        note.starts_with("the XPTI dispatcher was not initialized by libsycl.so.8"),
        "{note}"
    );
    p.xpti_missing = Some(("sycl".into(), "not found".into()));
    p.xpti_initialized = true;
    assert_eq!(
        p.xpti_note(&options).unwrap(),
        "the XPTI dispatcher that announced stream `sycl` could not be found (not found), \
         so no XPTI notifications were recorded"
    );
    p.xpti_streams.insert(0x101, "sycl".into());
    assert_eq!(p.xpti_note(&options), None, "a stream was recorded");
    // Without an XPTI library and without any stream: nothing to say.
    let (q, _) = process(dir.path());
    assert_eq!(q.xpti_note(&options), None);
}

#[test]
fn the_runtime_subscribes_when_xpti_subscribers_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let (mut p, _) = process(dir.path());
    let mut with = |env: &[(&str, &str)]| {
        p.described.env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        p.runtime_subscribes()
    };
    assert!(!with(&[]));
    assert!(with(&[("XPTI_SUBSCRIBERS", "/x/libstrobe_runtime.so")]));
    assert!(with(&[(
        "XPTI_SUBSCRIBERS",
        " libother.so , /x/libstrobe_runtime.so "
    )]));
    assert!(with(&[
        ("LD_PRELOAD", "/a/liba.so:/p/librt-copy.so"),
        ("XPTI_SUBSCRIBERS", "/p/librt-copy.so")
    ]));
    assert!(!with(&[("XPTI_SUBSCRIBERS", "/x/libother.so")]));
    assert!(!with(&[("XPTI_SUBSCRIBERS", ",,")]));
    assert!(!with(&[("LD_PRELOAD", "/x/libstrobe_runtime.so")]));
}

#[test]
fn every_sample_of_a_timer_weighs_one_period_and_counts_its_expirations() {
    let mut w = TimerWeights::default();
    assert_eq!(w.weigh(4_000_000, 0, 10), 4_000_000);
    assert_eq!(w.weigh(4_000_000, 3, 20), 4_000_000);
    assert_eq!(w.weigh(4_000_000, u32::MAX, 30), 4_000_000);
    assert_eq!(w.samples, 3);
    assert_eq!(w.expirations, 1 + 4 + (1 + u64::from(u32::MAX)));
    assert_eq!(w.last_ns, 30);
}

#[test]
fn damaged_rings_are_counted_per_thread_and_past_a_few_threads_together() {
    let dir = tempfile::tempdir().unwrap();
    let (mut p, options) = process(dir.path());
    let mut batch = Batch::default();
    for tid in 0..CORRUPT_THREADS_NAMED as i32 + 3 {
        batch.corrupt.push((tid, Source::Events));
    }
    batch.corrupt.push((0, Source::Events));
    batch.corrupt.push((0, Source::Samples));
    batch.retired = [5, 1, 2, 3, 4, 6];
    batch.notes.push("a note".into());
    p.apply(batch, &options);
    let again = Batch {
        retired: [1, 0, 0, 0, 0, u64::MAX],
        ..Batch::default()
    };
    p.apply(again, &options);
    // Sixteen (thread, ring) pairs by name, the rest per kind of ring.
    assert_eq!(p.corrupt.len(), CORRUPT_THREADS_NAMED + 2);
    assert_eq!(p.corrupt[&(0, true)], 2);
    assert_eq!(p.corrupt[&(15, true)], 1);
    assert_eq!(p.corrupt[&(-1, true)], 3, "the threads past those named");
    assert_eq!(p.corrupt[&(-1, false)], 1, "a pair not named before");
    assert!(!p.corrupt.contains_key(&(0, false)));
    assert_eq!(p.totals, [6, 1, 2, 3, 4, u64::MAX], "saturating");
    assert_eq!(p.notes, ["a note"]);
    assert!(p.profile.is_none(), "nothing needed a database yet");
}

#[test]
fn a_process_that_recorded_nothing_leaves_no_database() {
    let dir = tempfile::tempdir().unwrap();
    let (mut p, options) = process(dir.path());
    p.event(1, event::STRING, 1, 0, b"unused", &options);
    let (db, notes) = p.finish(&options);
    assert_eq!(db, None);
    assert!(notes.is_empty(), "{notes:?}");
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
}

#[test]
fn threads_that_found_no_slot_are_reported_in_a_database_kept_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let (p, options) = process(dir.path());
    let segment = p.segment.clone().unwrap();
    segment.header().slots_exhausted.store(3, Ordering::Relaxed);
    segment.header().events_dropped.store(2, Ordering::Relaxed);
    let (db, notes) = p.finish(&options);
    assert_eq!(
        notes,
        [
            "3 threads were not profiled: more than 4 threads were alive at once",
            "2 region/marker/tracing records were dropped"
        ]
    );
    let db = db.expect("a database for the notes");
    assert_eq!(db, dir.path().join("77.db"));
    assert!(db.exists());
}
