//! Tool plugins (seed 001): the shared libraries named in
//! `STROBE_TOOL_LIB`, loaded into the program when, and only when, the
//! user asks for them.
//!
//! Owns loading them once per process image (before `main`), feeding the
//! buffered record service they subscribe to (every sample, from the
//! signal handler; every tracing notification, on the notifying thread),
//! finalizing them at exit (`atexit`), and forgetting the parent's
//! contexts in a forked child. This is the one exception to "nothing of
//! strobe inside the program": a tool's contexts, buffers and callback
//! threads live in the program because that is its job. Never loads
//! anything when the variable is unset or empty.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use strobe_buffer::record::{SampleRecord, XptiRecord};
use strobe_wire::sample::{Sample, TimerClock};

/// Whether a tool was loaded in this process image.
static LOADED: AtomicBool = AtomicBool::new(false);
/// The process that loaded them: a forked child inherits the `atexit`
/// handler, but the callback threads its buffers wait for exist only here.
static LOADED_BY: AtomicI32 = AtomicI32::new(0);

/// Loads the tools named in `STROBE_TOOL_LIB` (problems are warnings on
/// stderr naming the library).
pub fn load() {
    let Some(list) = std::env::var_os(strobe_buffer::tool::TOOL_ENV) else {
        return;
    };
    let list = list.to_string_lossy().into_owned();
    if list.trim().is_empty() || LOADED.load(Ordering::SeqCst) {
        return;
    }
    let report = strobe_buffer::tool::load_list(&list);
    if report.loaded.is_empty() {
        return;
    }
    LOADED.store(true, Ordering::SeqCst);
    // SAFETY: getpid has no preconditions.
    LOADED_BY.store(unsafe { libc::getpid() }, Ordering::SeqCst);
    strobe_sampler::set_sample_tap(Some(sample_to_tools));
    // SAFETY: registering a plain extern "C" function.
    unsafe { libc::atexit(finalize_at_exit) };
}

/// **Signal handler**: hands one sample to the tools' buffers (the buffer
/// service's emit neither allocates nor locks).
fn sample_to_tools(s: &Sample<'_>) {
    let head = SampleRecord {
        timestamp_ns: s.timestamp_ns,
        tid: s.tid as u32,
        cpu: u32::MAX,
        frame_count: s.frames.len() as u32,
        flags: if s.complete { 0 } else { 2 },
        cpu_time_ns: s.cpu_time_ns,
        peak_rss_kb: s.peak_rss_kb,
    };
    let op = match s.clock {
        TimerClock::ThreadCpu => 0,
        TimerClock::Realtime => 1,
    };
    strobe_buffer::emit_sample(op, &head, s.frames);
}

/// Whether a tool was loaded (feeding it is worth the work).
#[inline]
pub fn loaded() -> bool {
    LOADED.load(Ordering::Relaxed)
}

/// Hands one tracing notification to the tools' buffers.
pub fn xpti_to_tools(record: &XptiRecord) {
    let op = strobe_buffer::kind::xpti_operation_for_trace_type(record.trace_type).unwrap_or(0);
    strobe_buffer::emit(op, record);
}

extern "C" fn finalize_at_exit() {
    // SAFETY: getpid has no preconditions.
    if LOADED_BY.load(Ordering::SeqCst) != unsafe { libc::getpid() } {
        return;
    }
    let _ = std::panic::catch_unwind(|| {
        strobe_sampler::set_sample_tap(None);
        strobe_buffer::tool::finalize();
    });
}

/// In a forked child: the parent's contexts deliver through threads that
/// do not exist here; they are forgotten (a tool may create new ones).
pub fn after_fork_in_child() {
    if LOADED.swap(false, Ordering::SeqCst) {
        strobe_sampler::set_sample_tap(None);
        strobe_buffer::dispatch::forget_contexts_after_fork();
    }
}
