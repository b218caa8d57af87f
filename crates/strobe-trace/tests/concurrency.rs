//! Races the lock-free paths against their writers with real threads:
//! callback tables republished while notifications run, and the recorder
//! drained while producers record.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use strobe_trace::recorder::Recorder;
use strobe_trace::types::trace_point;
use strobe_trace::*;

static DELIVERED: AtomicU64 = AtomicU64::new(0);
unsafe extern "C" fn counted(
    _: u16,
    _: *mut EventData,
    e: *mut EventData,
    _: u64,
    _: *const c_void,
) {
    // The event must be readable whenever a callback runs.
    // SAFETY: notify passes a live event.
    assert!(unsafe { (*e).unique_id } != 0);
    DELIVERED.fetch_add(1, Ordering::Relaxed);
}
unsafe extern "C" fn other(_: u16, _: *mut EventData, _: *mut EventData, _: u64, _: *const c_void) {
}

#[test]
fn callbacks_change_while_notifying() {
    let fw = Framework::new();
    let s = fw.register_stream(b"race").unwrap();
    let (ev, _) = fw.make_event(&PayloadSpec::named("race"), 0, 0).unwrap();
    fw.register_raw_callback(s, trace_point::TASK_BEGIN, counted)
        .unwrap();
    let stop = AtomicBool::new(false);
    let sent = AtomicU64::new(0);
    std::thread::scope(|sc| {
        for _ in 0..2 {
            sc.spawn(|| {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    fw.notify(
                        s,
                        trace_point::TASK_BEGIN,
                        None,
                        Some(ev),
                        n,
                        std::ptr::null(),
                    )
                    .unwrap();
                    n += 1;
                    sent.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        // Writer: keep republishing the list around the counted callback,
        // until the notifiers (which a loaded machine may start late) have
        // sent their share during the republishing.
        let mut i = 0;
        while i < 5_000 || sent.load(Ordering::Relaxed) < 20_000 {
            i += 1;
            fw.register_raw_callback(s, trace_point::TASK_BEGIN, other)
                .unwrap();
            fw.unregister_raw_callback(s, trace_point::TASK_BEGIN, other)
                .unwrap();
            if i % 100 == 0 {
                let h = fw
                    .register_callback(s, trace_point::TASK_BEGIN, |_| {})
                    .unwrap();
                fw.unregister_callback(s, trace_point::TASK_BEGIN, h)
                    .unwrap();
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    // The counted callback stayed registered throughout: every notification
    // reached it exactly once.
    assert_eq!(
        DELIVERED.load(Ordering::Relaxed),
        sent.load(Ordering::Relaxed)
    );
}

#[test]
fn recorder_drained_while_recording() {
    let fw = Framework::new();
    let rec = Recorder::new(256);
    fw.add_subscriber(Arc::new(rec.clone()));
    let s = fw.initialize_stream(b"rec.race", 1, 0, b"1").unwrap();
    let per_thread = 20_000u64;
    let done = AtomicBool::new(false);
    let mut got = Vec::new();
    std::thread::scope(|sc| {
        let producers: Vec<_> = (0..2)
            .map(|t| {
                let fw = &fw;
                sc.spawn(move || {
                    let name = format!("producer{t}");
                    let (ev, _) = fw.make_event(&PayloadSpec::named(&name), 0, 0).unwrap();
                    for i in 1..=per_thread {
                        fw.notify(
                            s,
                            trace_point::TASK_BEGIN,
                            None,
                            Some(ev),
                            i,
                            std::ptr::null(),
                        )
                        .unwrap();
                    }
                })
            })
            .collect();
        let consumer = sc.spawn(|| {
            let mut out = Vec::new();
            while !done.load(Ordering::Acquire) {
                rec.drain(&mut out);
                std::thread::yield_now();
            }
            rec.drain(&mut out);
            out
        });
        for p in producers {
            p.join().unwrap();
        }
        done.store(true, Ordering::Release);
        got = consumer.join().unwrap();
    });
    // Nothing lost without being counted, nothing duplicated, order kept.
    assert_eq!(got.len() as u64 + rec.dropped(), 2 * per_thread);
    let mut by_thread: std::collections::HashMap<u64, Vec<u64>> = Default::default();
    for r in &got {
        by_thread.entry(r.thread).or_default().push(r.instance);
    }
    for (_, v) in by_thread {
        assert!(
            v.windows(2).all(|w| w[0] < w[1]),
            "per-thread order kept, no duplicates"
        );
    }
}
