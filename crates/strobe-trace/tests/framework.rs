//! Behaviour of the Rust API on private framework instances, with real
//! threads.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use strobe_trace::recorder::Recorder;
use strobe_trace::types::{activity, event_type, trace_point, *};
use strobe_trace::*;

fn fw_with_stream() -> (Framework, StreamId) {
    let fw = Framework::new();
    let s = fw.register_stream(b"test.stream").unwrap();
    (fw, s)
}

#[test]
fn streams_register_once_and_reject_bad_names() {
    let fw = Framework::new();
    let a = fw.register_stream(b"a").unwrap();
    let b = fw.register_stream(b"b").unwrap();
    assert_ne!(a, 0);
    assert_ne!(a, b);
    assert_eq!(fw.register_stream(b"a").unwrap(), a);
    assert_eq!(fw.stream_name(b).unwrap().to_bytes(), b"b");
    assert!(matches!(
        fw.register_stream(b""),
        Err(TraceError::InvalidArg(_))
    ));
    assert!(matches!(
        fw.unregister_stream(b"zzz"),
        Err(TraceError::NotFound(_))
    ));
    // A stream without callbacks has nothing to unregister (Intel's answer).
    assert!(matches!(
        fw.unregister_stream(b"a"),
        Err(TraceError::NotFound(_))
    ));
    // 254 streams at most: 255 is the invalid id.
    for i in 0..252 {
        let id = fw.register_stream(format!("s{i}").as_bytes()).unwrap();
        assert_ne!(id, strobe_trace::types::INVALID_STREAM_ID);
    }
    assert!(matches!(
        fw.register_stream(b"one-too-many"),
        Err(TraceError::Full(_))
    ));
    assert_eq!(TraceError::Full("x").code(), result::FAIL);
}

#[test]
fn same_payload_same_event_and_counting_instances() {
    let fw = Framework::new();
    let p = PayloadSpec::at("function1", "main.cpp", 104, 2);
    let (e1, i1) = fw
        .make_event(&p, event_type::ALGORITHM, activity::ACTIVE)
        .unwrap();
    let (e2, i2) = fw
        .make_event(&p, event_type::ALGORITHM, activity::ACTIVE)
        .unwrap();
    assert!(std::ptr::eq(e1, e2));
    assert_eq!((i1, i2), (1, 2));
    assert_ne!(e1.unique_id(), 0);
    let uid = fw.register_payload(&p).unwrap();
    assert_eq!(uid, e1.unique_id());
    // Different line → different event.
    let (e3, i3) = fw
        .make_event(
            &PayloadSpec::at("function1", "main.cpp", 105, 2),
            event_type::ALGORITHM,
            activity::ACTIVE,
        )
        .unwrap();
    assert_ne!(e3.unique_id(), e1.unique_id());
    assert_eq!(i3, 1);
    // Unique ids are not addresses of the events.
    assert_ne!(e1.unique_id(), e1 as *const EventData as u64);
    // Lookup and payload query.
    assert!(std::ptr::eq(fw.find_event(uid).unwrap(), e1));
    assert!(fw.find_event(0).is_none());
    assert!(fw.find_event(12345).is_none());
    let pl = fw.query_payload(uid).unwrap();
    assert_eq!(pl.name().unwrap().to_bytes(), b"function1");
    assert_eq!(pl.source_file().unwrap().to_bytes(), b"main.cpp");
    assert_eq!((pl.line(), pl.column()), (Some(104), Some(2)));
    assert_eq!(pl.unique_id(), Some(uid));
    assert_ne!(pl.flags & payload_flags::NAME, 0);
    assert_ne!(pl.flags & payload_flags::SOURCE_FILE, 0);
    assert_eq!(pl.flags & payload_flags::CODE_POINTER, 0);
    assert!(std::ptr::eq(e1.payload().unwrap(), pl));
    // Registered payload without an event: queryable, not findable.
    let only = fw.register_payload(&PayloadSpec::code(0x1234)).unwrap();
    assert!(fw.find_event(only).is_none());
    assert_eq!(fw.query_payload(only).unwrap().code_ptr(), Some(0x1234));
    // Empty payloads are rejected.
    assert!(matches!(
        fw.make_event(&PayloadSpec::default(), 0, 0),
        Err(TraceError::InvalidArg(_))
    ));
    assert!(matches!(
        fw.register_payload(&PayloadSpec {
            name: Some(b""),
            ..Default::default()
        }),
        Err(TraceError::InvalidArg(_))
    ));
}

#[test]
fn concurrent_creation_yields_one_event_and_all_instances() {
    let fw = Framework::new();
    let per_thread = 1000;
    let results: Vec<Vec<(u64, u64)>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    (0..per_thread)
                        .map(|i| {
                            let name = format!("tp{}", i % 10);
                            let (e, inst) =
                                fw.make_event(&PayloadSpec::named(&name), 0, 0).unwrap();
                            (e.unique_id(), inst)
                        })
                        .collect()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut by_uid: std::collections::HashMap<u64, Vec<u64>> = Default::default();
    for (uid, inst) in results.into_iter().flatten() {
        by_uid.entry(uid).or_default().push(inst);
    }
    assert_eq!(by_uid.len(), 10);
    for (_, mut v) in by_uid {
        v.sort();
        assert_eq!(
            v,
            (1..=400).collect::<Vec<_>>(),
            "each instance number exactly once"
        );
    }
}

#[test]
fn callbacks_duplicate_notfound_and_delivery() {
    let (fw, s) = fw_with_stream();
    let (parent, _) = fw
        .make_event(&PayloadSpec::named("graph"), event_type::GRAPH, 0)
        .unwrap();
    let (ev, inst) = fw
        .make_event(&PayloadSpec::named("node"), event_type::ALGORITHM, 0)
        .unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let l2 = log.clone();
    let h = fw
        .register_callback(s, trace_point::NODE_CREATE, move |n| {
            l2.lock().unwrap().push((
                n.stream,
                n.trace_type,
                n.parent.map(|p| p.unique_id()),
                n.event.map(|e| e.unique_id()),
                n.instance,
                n.user_data as usize,
            ));
        })
        .unwrap();
    let ud = 0xabcusize as *const c_void;
    fw.notify(
        s,
        trace_point::NODE_CREATE,
        Some(parent),
        Some(ev),
        inst,
        ud,
    )
    .unwrap();
    // Another type, no callbacks: success, nothing delivered.
    fw.notify(s, trace_point::EDGE_CREATE, None, Some(ev), inst, ud)
        .unwrap();
    assert_eq!(
        *log.lock().unwrap(),
        vec![(
            s,
            trace_point::NODE_CREATE,
            Some(parent.unique_id()),
            Some(ev.unique_id()),
            inst,
            0xabc
        )]
    );
    assert!(fw.check_trace_enabled(s, 0));
    assert!(fw.check_trace_enabled(s, trace_point::NODE_CREATE));
    assert!(!fw.check_trace_enabled(s, trace_point::EDGE_CREATE));
    fw.unregister_callback(s, trace_point::NODE_CREATE, h)
        .unwrap();
    assert!(matches!(
        fw.unregister_callback(s, trace_point::NODE_CREATE, h),
        Err(TraceError::NotFound(_))
    ));
    assert!(!fw.check_trace_enabled(s, 0));
    fw.notify(s, trace_point::NODE_CREATE, None, Some(ev), inst, ud)
        .unwrap();
    assert_eq!(log.lock().unwrap().len(), 1);
    // Unregistered stream ids are refused for registration.
    assert!(matches!(
        fw.register_callback(200, trace_point::NODE_CREATE, |_| {}),
        Err(TraceError::InvalidArg(_))
    ));
    assert!(matches!(
        fw.register_callback(0, trace_point::NODE_CREATE, |_| {}),
        Err(TraceError::InvalidArg(_))
    ));
}

unsafe extern "C" fn counting_cb(
    _t: u16,
    _p: *mut EventData,
    _e: *mut EventData,
    inst: u64,
    _u: *const c_void,
) {
    RAW_SUM.fetch_add(inst, Ordering::Relaxed);
}
static RAW_SUM: AtomicU64 = AtomicU64::new(0);

#[test]
fn raw_callbacks_duplicate_rules() {
    let (fw, s) = fw_with_stream();
    fw.register_raw_callback(s, trace_point::TASK_BEGIN, counting_cb)
        .unwrap();
    assert_eq!(
        fw.register_raw_callback(s, trace_point::TASK_BEGIN, counting_cb)
            .unwrap_err()
            .code(),
        result::DUPLICATE
    );
    // The same function on another type is fine.
    fw.register_raw_callback(s, trace_point::TASK_END, counting_cb)
        .unwrap();
    let (ev, _) = fw.make_event(&PayloadSpec::named("t"), 0, 0).unwrap();
    fw.notify(
        s,
        trace_point::TASK_BEGIN,
        None,
        Some(ev),
        5,
        std::ptr::null(),
    )
    .unwrap();
    fw.notify(
        s,
        trace_point::TASK_END,
        None,
        Some(ev),
        7,
        std::ptr::null(),
    )
    .unwrap();
    assert_eq!(RAW_SUM.load(Ordering::Relaxed), 12);
    fw.unregister_raw_callback(s, trace_point::TASK_BEGIN, counting_cb)
        .unwrap();
    assert_eq!(
        fw.unregister_raw_callback(s, trace_point::TASK_BEGIN, counting_cb)
            .unwrap_err()
            .code(),
        result::NOTFOUND
    );
    assert_eq!(
        fw.unregister_raw_callback(s, trace_point::BARRIER_BEGIN, counting_cb)
            .unwrap_err()
            .code(),
        result::NOTFOUND
    );
}

#[test]
fn null_event_rules_and_disabled() {
    let (fw, s) = fw_with_stream();
    let hits = Arc::new(AtomicU64::new(0));
    let h2 = hits.clone();
    fw.register_callback(s, trace_point::FUNCTION_BEGIN, move |n| {
        assert!(n.event.is_none());
        h2.fetch_add(1, Ordering::Relaxed);
    })
    .unwrap();
    let ud = &5u32 as *const u32 as *const c_void;
    fw.notify(s, trace_point::FUNCTION_BEGIN, None, None, 1, ud)
        .unwrap();
    assert_eq!(
        fw.notify(
            s,
            trace_point::FUNCTION_BEGIN,
            None,
            None,
            1,
            std::ptr::null()
        )
        .unwrap_err()
        .code(),
        result::INVALIDARG
    );
    assert_eq!(
        fw.notify(s, trace_point::TASK_BEGIN, None, None, 1, ud)
            .unwrap_err()
            .code(),
        result::INVALIDARG
    );
    assert_eq!(hits.load(Ordering::Relaxed), 1);
    fw.set_enabled(false);
    assert!(!fw.is_enabled());
    assert!(!fw.check_trace_enabled(s, 0));
    assert_eq!(
        fw.notify(s, trace_point::FUNCTION_BEGIN, None, None, 1, ud)
            .unwrap_err(),
        TraceError::Disabled
    );
    assert_eq!(TraceError::Disabled.code(), result::FALSE);
    assert_eq!(hits.load(Ordering::Relaxed), 1);
    fw.set_enabled(true);
    fw.notify(s, trace_point::FUNCTION_BEGIN, None, None, 1, ud)
        .unwrap();
    assert_eq!(hits.load(Ordering::Relaxed), 2);
}

#[test]
fn metadata_on_events() {
    let fw = Framework::new();
    let (ev, _) = fw.make_event(&PayloadSpec::named("k"), 0, 0).unwrap();
    fw.add_metadata_str(ev, "kernel", "saxpy").unwrap();
    let n = fw
        .register_object(&42u64.to_ne_bytes(), object_type::UNSIGNED_INTEGER)
        .unwrap();
    fw.add_metadata(ev, b"size", n).unwrap();
    assert_eq!(
        fw.add_metadata(ev, b"size", n).unwrap_err().code(),
        result::DUPLICATE
    );
    assert_eq!(
        fw.add_metadata(ev, b"", n).unwrap_err().code(),
        result::INVALIDARG
    );
    assert_eq!(
        fw.add_metadata(ev, b"other", 9999).unwrap_err().code(),
        result::INVALIDARG
    );
    let foreign = EventData::zeroed();
    assert_eq!(
        fw.add_metadata(&foreign, b"x", n).unwrap_err().code(),
        result::INVALIDARG
    );
    let md = fw.metadata(ev).unwrap();
    assert_eq!(md.len(), 2);
    assert_eq!(fw.lookup_string(md[0].0).unwrap().to_bytes(), b"kernel");
    assert_eq!(&*fw.lookup_object(md[0].1).unwrap().data, b"saxpy");
    assert_eq!(fw.lookup_string(md[1].0).unwrap().to_bytes(), b"size");
    assert_eq!(
        fw.lookup_object(md[1].1).unwrap().kind,
        object_type::UNSIGNED_INTEGER
    );
    assert!(fw.lookup_object(-1).is_none());
}

#[test]
fn user_defined_types() {
    let fw = Framework::new();
    let rb = fw
        .register_user_defined_trace_point(b"myTest", trace_point_begin(0))
        .unwrap();
    let re = fw
        .register_user_defined_trace_point(b"myTest", trace_point_end(0))
        .unwrap();
    let ab = fw
        .register_user_defined_trace_point(b"myTest", trace_point_begin(1))
        .unwrap();
    let other = fw
        .register_user_defined_trace_point(b"otherTool", trace_point_begin(0))
        .unwrap();
    assert_eq!(tool_id(rb), tool_id(re));
    assert_ne!(tool_id(rb), 0);
    assert_ne!(tool_id(other), tool_id(rb));
    assert_eq!(extract_user_defined_id(rb), 0);
    assert_eq!(extract_user_defined_id(re), 1);
    assert_eq!(extract_user_defined_id(ab), 2);
    assert_eq!(rb | 1, re);
    assert!(is_user_defined(rb));
    assert!(!is_user_defined(trace_point::TASK_BEGIN));
    assert_eq!(
        fw.register_user_defined_trace_point(b"myTest", trace_point_begin(0))
            .unwrap(),
        rb
    );
    let ev = fw.register_user_defined_event_type(b"myTest", 0).unwrap();
    assert_eq!(tool_id(ev), tool_id(rb));
    assert_eq!(
        fw.register_user_defined_trace_point(b"myTest", 128)
            .unwrap_err()
            .code(),
        result::INVALIDARG
    );
    assert_eq!(
        fw.register_user_defined_trace_point(b"", 1)
            .unwrap_err()
            .code(),
        result::INVALIDARG
    );
    assert_eq!(fw.vendor_name(tool_id(other)).unwrap(), b"otherTool");
    // User-defined types are notified like predefined ones.
    let s = fw.register_stream(b"u").unwrap();
    let hits = Arc::new(AtomicU64::new(0));
    let h2 = hits.clone();
    fw.register_callback(s, re, move |n| {
        h2.fetch_add(n.trace_type as u64, Ordering::Relaxed);
    })
    .unwrap();
    let (e, _) = fw
        .make_event(&PayloadSpec::named("x"), ev, activity::ACTIVE)
        .unwrap();
    assert_eq!(e.event_type, ev);
    fw.notify(s, rb, None, Some(e), 1, std::ptr::null())
        .unwrap();
    fw.notify(s, re, None, Some(e), 1, std::ptr::null())
        .unwrap();
    assert_eq!(hits.load(Ordering::Relaxed), re as u64);
}

#[test]
fn scoped_notify_pairs_begin_and_end() {
    let (fw, s) = fw_with_stream();
    let log = Arc::new(Mutex::new(Vec::new()));
    for t in [trace_point::REGION_BEGIN, trace_point::REGION_END] {
        let l = log.clone();
        fw.register_callback(s, t, move |n| {
            l.lock().unwrap().push((n.trace_type, n.instance))
        })
        .unwrap();
    }
    let (ev, inst) = fw.make_event(&PayloadSpec::named("scope"), 0, 0).unwrap();
    {
        let _g = ScopedNotify::new(
            &fw,
            s,
            trace_point::REGION_BEGIN,
            None,
            Some(ev),
            inst,
            std::ptr::null(),
        );
        log.lock().unwrap().push((0, 0));
    }
    assert_eq!(
        *log.lock().unwrap(),
        vec![
            (trace_point::REGION_BEGIN, inst),
            (0, 0),
            (trace_point::REGION_END, inst)
        ]
    );
    fw.set_enabled(false);
    {
        let _g = ScopedNotify::new(
            &fw,
            s,
            trace_point::REGION_BEGIN,
            None,
            Some(ev),
            inst,
            std::ptr::null(),
        );
    }
    assert_eq!(log.lock().unwrap().len(), 3);
}

struct Counting {
    inits: Mutex<Vec<(String, u32, u32, String)>>,
    finishes: Mutex<Vec<String>>,
}

impl Subscriber for Counting {
    fn name(&self) -> &str {
        "counting"
    }
    fn init(&self, fw: &Framework, s: &StreamInit<'_>) {
        self.inits.lock().unwrap().push((
            s.name.to_string_lossy().into_owned(),
            s.major,
            s.minor,
            s.version.to_string_lossy().into_owned(),
        ));
        let _ = fw.register_callback(s.id, trace_point::TASK_BEGIN, |_| {});
    }
    fn finish(&self, _fw: &Framework, name: &std::ffi::CStr) {
        self.finishes
            .lock()
            .unwrap()
            .push(name.to_string_lossy().into_owned());
    }
}

#[test]
fn subscribers_are_told_about_streams() {
    let fw = Framework::new();
    let early = fw.initialize_stream(b"early", 1, 0, b"1.0").unwrap();
    let sub = Arc::new(Counting {
        inits: Mutex::new(vec![]),
        finishes: Mutex::new(vec![]),
    });
    fw.add_subscriber(sub.clone());
    assert_eq!(fw.subscriber_count(), 1);
    // Replayed on attach.
    assert_eq!(sub.inits.lock().unwrap()[0].0, "early");
    assert!(fw.check_trace_enabled(early, trace_point::TASK_BEGIN));
    let id = fw.initialize_stream(b"foo", 2, 1, b"foo 2.1").unwrap();
    // A repeat while initialized is not forwarded again.
    assert_eq!(fw.initialize_stream(b"foo", 2, 1, b"foo 2.1").unwrap(), id);
    assert_eq!(
        sub.inits.lock().unwrap()[1..],
        [("foo".to_string(), 2, 1, "foo 2.1".to_string())]
    );
    fw.finalize_stream(b"foo").unwrap();
    assert_eq!(*sub.finishes.lock().unwrap(), vec!["foo".to_string()]);
    assert_eq!(
        fw.finalize_stream(b"never").unwrap_err().code(),
        result::NOTFOUND
    );
    // After finalize, initialize announces again (subscriber copes: Duplicate ignored).
    fw.initialize_stream(b"foo", 2, 1, b"foo 2.1").unwrap();
    assert_eq!(sub.inits.lock().unwrap().len(), 3);
    assert!(fw.initialize_stream(b"", 1, 0, b"").is_err());
}

#[test]
fn recorder_captures_per_thread_and_counts_drops() {
    let fw = Framework::new();
    let rec = Recorder::new(64);
    fw.add_subscriber(Arc::new(rec.clone()));
    let s = fw.initialize_stream(b"rec", 1, 0, b"1").unwrap();
    let fw = &fw;
    std::thread::scope(|sc| {
        for t in 0..3u64 {
            sc.spawn(move || {
                let name = format!("thread{t}");
                for _ in 0..50 {
                    let (ev, inst) = fw.make_event(&PayloadSpec::named(&name), 0, 0).unwrap();
                    fw.notify(
                        s,
                        trace_point::TASK_BEGIN,
                        None,
                        Some(ev),
                        inst,
                        std::ptr::null(),
                    )
                    .unwrap();
                }
            });
        }
    });
    let mut out = Vec::new();
    assert_eq!(rec.drain(&mut out), 150);
    assert_eq!(rec.dropped(), 0);
    let threads: std::collections::HashSet<u64> = out.iter().map(|r| r.thread).collect();
    assert_eq!(threads.len(), 3);
    for t in &threads {
        let mine: Vec<_> = out.iter().filter(|r| r.thread == *t).collect();
        assert_eq!(mine.len(), 50);
        assert!(mine
            .windows(2)
            .all(|w| w[0].timestamp_ns <= w[1].timestamp_ns && w[0].instance + 1 == w[1].instance));
        assert!(mine
            .iter()
            .all(|r| r.stream == s && r.trace_type == trace_point::TASK_BEGIN));
    }
    // Bounded: 100 more on one thread with capacity 64 → 36 dropped.
    let (ev, _) = fw.make_event(&PayloadSpec::named("main"), 0, 0).unwrap();
    for i in 0..100 {
        fw.notify(
            s,
            trace_point::TASK_END,
            None,
            Some(ev),
            i,
            std::ptr::null(),
        )
        .unwrap();
    }
    out.clear();
    assert_eq!(rec.drain(&mut out), 64);
    assert_eq!(rec.dropped(), 36);
    assert_eq!(rec.drain(&mut out), 0);
}

#[test]
fn printer_writes_readable_lines() {
    #[derive(Clone)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buf = Buf(Arc::new(Mutex::new(Vec::new())));
    let fw = Framework::new();
    fw.add_subscriber(Arc::new(printer::Printer::to_writer(Box::new(buf.clone()))));
    let s = fw.initialize_stream(b"print.me", 1, 0, b"1").unwrap();
    let (ev, inst) = fw
        .make_event(&PayloadSpec::at("saxpy", "k.cpp", 7, 3), 0, 0)
        .unwrap();
    fw.add_metadata_str(ev, "queue", "q0").unwrap();
    fw.notify(
        s,
        trace_point::TASK_BEGIN,
        None,
        Some(ev),
        inst,
        std::ptr::null(),
    )
    .unwrap();
    fw.finalize_stream(b"print.me").unwrap();
    let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    let line = text.lines().next().unwrap();
    for part in [
        "stream=print.me",
        "type=task_begin",
        "name=saxpy",
        "at=k.cpp:7:3",
        "queue=q0",
        "instance=1",
    ] {
        assert!(line.contains(part), "{part} missing from {line}");
    }
    assert!(text.contains("stream print.me finalized"));
}

#[test]
fn unique_ids_increase() {
    let fw = Framework::new();
    let a = fw.next_unique_id();
    let b = fw.next_unique_id();
    assert!(b > a);
}
