//! Regions and markers: the user API's events, carried by `strobe-trace`.
//!
//! Owns the runtime's `strobe` stream on the process-wide tracing framework,
//! the recorder subscriber that captures every notification (strobe's own
//! and those of XPTI-instrumented code sharing the framework), and the
//! per-thread stack of open regions that turns `pop` into the matching end
//! notification. Never runs in a signal handler.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use strobe_trace::recorder::Recorder as TraceRecorder;
use strobe_trace::types::{activity, event_type, trace_point, StreamId};
use strobe_trace::{Framework, PayloadSpec};

/// Per-thread capacity of the trace recorder's queue (records).
const QUEUE_RECORDS: usize = 1 << 16;

/// The runtime's tracing state.
pub struct Tracing {
    framework: &'static Framework,
    stream: StreamId,
    /// The recorder; the writer drains it.
    pub recorder: TraceRecorder,
    paused: AtomicBool,
    /// `pop` without a matching `push` on that thread.
    pub unbalanced: AtomicU64,
}

thread_local! {
    /// Open regions of this thread: (event unique id, instance).
    static OPEN: RefCell<Vec<(u64, u64)>> = const { RefCell::new(Vec::new()) };
}

impl Tracing {
    /// Attaches the recorder to the process-wide framework and opens the
    /// `strobe` stream.
    pub fn start() -> Result<Tracing, String> {
        let framework = strobe_trace::global();
        let recorder = TraceRecorder::new(QUEUE_RECORDS);
        framework.add_subscriber(Arc::new(recorder.clone()));
        framework.set_enabled(true);
        let stream = framework
            .initialize_stream(b"strobe", 1, 0, b"1.0")
            .map_err(|e| format!("cannot open the strobe trace stream: {e}"))?;
        recorder.attach(framework, stream);
        Ok(Tracing {
            framework,
            stream,
            recorder,
            paused: AtomicBool::new(false),
            unbalanced: AtomicU64::new(0),
        })
    }

    /// Opens a region named `name` on the calling thread.
    pub fn push(&self, name: &[u8]) {
        if self.paused.load(Ordering::Relaxed) || name.is_empty() {
            return;
        }
        let spec = PayloadSpec {
            name: Some(name),
            ..Default::default()
        };
        let Ok((event, instance)) =
            self.framework
                .make_event(&spec, event_type::USER_DEFINED, activity::ACTIVE)
        else {
            return;
        };
        if self
            .framework
            .notify(
                self.stream,
                trace_point::REGION_BEGIN,
                None,
                Some(event),
                instance,
                std::ptr::null(),
            )
            .is_ok()
        {
            let _ = OPEN.try_with(|open| open.borrow_mut().push((event.unique_id(), instance)));
        }
    }

    /// Closes the calling thread's innermost open region.
    pub fn pop(&self) {
        let top = OPEN.try_with(|open| open.borrow_mut().pop()).ok().flatten();
        let Some((uid, instance)) = top else {
            self.unbalanced.fetch_add(1, Ordering::Relaxed);
            return;
        };
        if let Some(event) = self.framework.find_event(uid) {
            let _ = self.framework.notify(
                self.stream,
                trace_point::REGION_END,
                None,
                Some(event),
                instance,
                std::ptr::null(),
            );
        }
    }

    /// Records an instant marker named `name`.
    pub fn mark(&self, name: &[u8]) {
        if self.paused.load(Ordering::Relaxed) || name.is_empty() {
            return;
        }
        let spec = PayloadSpec {
            name: Some(name),
            ..Default::default()
        };
        if let Ok((event, instance)) =
            self.framework
                .make_event(&spec, event_type::USER_DEFINED, activity::ACTIVE)
        {
            let _ = self.framework.notify(
                self.stream,
                trace_point::SIGNAL,
                None,
                Some(event),
                instance,
                std::ptr::null(),
            );
        }
    }

    /// Stops or restarts recording new regions and markers (regions already
    /// open still end).
    pub fn set_paused(&self, paused: bool) {
        self.paused.store(paused, Ordering::Relaxed);
    }
}
