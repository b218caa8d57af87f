//! The process-wide framework: enable rules, in-process subscribers, reset.
//! One test function: the global is shared by everything in this binary.

use std::ffi::CStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use strobe_trace::types::trace_point;
use strobe_trace::*;

struct Tally(AtomicU64, AtomicU64);

impl Subscriber for Tally {
    fn name(&self) -> &str {
        "tally"
    }
    fn init(&self, fw: &Framework, s: &StreamInit<'_>) {
        self.0.fetch_add(1, Ordering::Relaxed);
        let _ = fw.register_raw_callback(s.id, trace_point::TASK_BEGIN, count_cb);
    }
    fn finish(&self, _fw: &Framework, _s: &CStr) {
        self.1.fetch_add(1, Ordering::Relaxed);
    }
}

static HITS: AtomicU64 = AtomicU64::new(0);
unsafe extern "C" fn count_cb(
    _: u16,
    _: *mut EventData,
    _: *mut EventData,
    _: u64,
    _: *const std::ffi::c_void,
) {
    HITS.fetch_add(1, Ordering::Relaxed);
}

#[test]
fn global_framework_rules() {
    // This test binary runs without XPTI_SUBSCRIBERS: disabled until a
    // subscriber attaches (unless the environment disables tracing).
    assert!(
        std::env::var_os(ENV_SUBSCRIBERS).is_none(),
        "run without XPTI_SUBSCRIBERS"
    );
    let env_ok = env_trace_enable();
    assert!(!trace_enabled());
    let g = global();
    assert!(std::ptr::eq(g, global()));
    let tally = Arc::new(Tally(AtomicU64::new(0), AtomicU64::new(0)));
    g.add_subscriber(tally.clone());
    assert_eq!(trace_enabled(), env_ok);
    g.set_enabled(true);
    assert!(trace_enabled());
    let s = g.initialize_stream(b"global.stream", 1, 0, b"1").unwrap();
    assert_eq!(tally.0.load(Ordering::Relaxed), 1);
    let (ev, inst) = g.make_event(&PayloadSpec::named("g"), 0, 0).unwrap();
    g.notify(
        s,
        trace_point::TASK_BEGIN,
        None,
        Some(ev),
        inst,
        std::ptr::null(),
    )
    .unwrap();
    assert_eq!(HITS.load(Ordering::Relaxed), 1);
    let uid = ev.unique_id();

    // Reset: tables start over, the old event stays readable, subscribers and
    // the forced state carry over.
    reset_global();
    let g2 = global();
    assert!(!std::ptr::eq(g, g2));
    assert!(g2.find_event(uid).is_none());
    assert_eq!(ev.payload().unwrap().name().unwrap().to_bytes(), b"g");
    assert!(trace_enabled());
    assert_eq!(g2.subscriber_count(), 1);
    g2.initialize_stream(b"global.stream", 1, 0, b"1").unwrap();
    assert_eq!(tally.0.load(Ordering::Relaxed), 2);
    g2.finalize_stream(b"global.stream").unwrap();
    assert_eq!(tally.1.load(Ordering::Relaxed), 1);
    // The replaced framework no longer drives the global enabled flag.
    g.set_enabled(false);
    assert!(trace_enabled());
    g2.set_enabled(false);
    assert!(!trace_enabled());
}
