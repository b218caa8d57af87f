//! Tracing-framework notifications (XPTI-instrumented code sharing the
//! process-wide `strobe-trace` framework) into the notifying thread's ring.
//!
//! Owns the runtime's subscriber: for every stream it registers callbacks
//! for the predefined trace-point types; each callback writes the
//! notification as one event, preceded, the first time the thread meets an
//! event, by the event's name. Never runs in a signal handler.

use crate::events::{emit, emit_now2};
use crate::state::current;
use crate::threads::slot_of_current_thread;
use std::cell::RefCell;
use std::ffi::CStr;
use std::sync::Arc;
use strobe_buffer::record::XptiRecord;
use strobe_core::shm::wire::{as_bytes, event, XptiBody};
use strobe_metrics::capi::region_kind;
use strobe_trace::subscriber::{StreamInit, Subscriber};
use strobe_trace::types::trace_point;
use strobe_trace::Framework;
use strobe_trace::Notification;

const NAMED: usize = 128;

thread_local! {
    /// Event ids whose names this thread already wrote (direct-mapped),
    /// with the runtime generation they were written for.
    static NAMED_EVENTS: RefCell<[(u64, u64); NAMED]> = const { RefCell::new([(0, 0); NAMED]) };
}

struct RingSubscriber;

impl Subscriber for RingSubscriber {
    fn name(&self) -> &str {
        "strobe-runtime"
    }

    fn init(&self, framework: &Framework, stream: &StreamInit<'_>) {
        for &t in trace_point::ALL_PREDEFINED {
            let _ = framework.register_callback(stream.id, t, record);
        }
    }

    fn finish(&self, _framework: &Framework, _stream_name: &CStr) {}
}

fn record(n: &Notification<'_>) {
    // A tool's group counts inside strobe's own begin and end records.
    if n.trace_type == trace_point::TASK_END {
        crate::metrics_abi::region_end(region_kind::XPTI_TASK);
    }
    record_in_ring(n);
    if n.trace_type == trace_point::TASK_BEGIN {
        crate::metrics_abi::region_begin(region_kind::XPTI_TASK, || {
            let uid = n.event?.unique_id;
            n.framework.query_payload(uid)?.name()
        });
    }
}

/// Writes the notification into the thread's ring (and hands it to tool
/// plugins).
fn record_in_ring(n: &Notification<'_>) {
    let Some(rt) = current().filter(|rt| rt.config.tracing) else {
        return;
    };
    let Some(slot) = slot_of_current_thread(rt) else {
        return;
    };
    let uid = n.event.map_or(0, |e| e.unique_id);
    if uid != 0 {
        let fresh = NAMED_EVENTS
            .try_with(|named| {
                let mut named = named.borrow_mut();
                let entry = &mut named[(uid as usize) % NAMED];
                let fresh = *entry != (uid, rt.generation);
                *entry = (uid, rt.generation);
                fresh
            })
            .unwrap_or(true);
        if fresh {
            let name = n
                .framework
                .query_payload(uid)
                .and_then(|p| p.name().map(|c| c.to_bytes().to_vec()))
                .unwrap_or_default();
            let mut bytes = uid.to_le_bytes().to_vec();
            bytes.extend_from_slice(&name);
            emit(rt, slot, event::XPTI_NAME, 0, 0, &bytes);
        }
    }
    let body = XptiBody {
        unique_id: uid,
        parent_unique_id: n.parent.map_or(0, |e| e.unique_id),
        instance: n.instance,
        user_data: n.user_data as u64,
        stream_id: n.stream as u32,
        trace_type: n.trace_type,
        reserved: 0,
    };
    if rt.counters.is_some() && pairs(body.trace_type) {
        crate::counters::with_region_readings(rt, slot, |readings| {
            emit_now2(rt, slot, event::XPTI, 0, as_bytes(&body), readings)
        });
    } else {
        emit_now2(rt, slot, event::XPTI, 0, as_bytes(&body), &[]);
    }
    if !crate::tools::loaded() {
        return;
    }
    crate::tools::xpti_to_tools(&XptiRecord {
        timestamp_ns: strobe_core::clock::now_ns(),
        unique_id: body.unique_id,
        parent_unique_id: body.parent_unique_id,
        instance: body.instance,
        user_data: body.user_data,
        tid: strobe_core::thread::gettid() as u32,
        trace_type: body.trace_type,
        stream_id: body.stream_id as u8,
        reserved: 0,
    });
}

/// Whether `trace_type` begins or ends a pair the collector makes a
/// region of (the collector's `trace_types::span_category`): those carry
/// counter readings when the process counts.
fn pairs(trace_type: u16) -> bool {
    use strobe_trace::types::trace_point::*;
    trace_type & 0x80 != 0
        || matches!(
            trace_type & !1,
            REGION_BEGIN
                | TASK_BEGIN
                | BARRIER_BEGIN
                | LOCK_BEGIN
                | TRANSFER_BEGIN
                | THREAD_BEGIN
                | WAIT_BEGIN
                | FUNCTION_BEGIN
                | FUNCTION_WITH_ARGS_BEGIN
                | MEM_ALLOC_BEGIN
                | MEM_RELEASE_BEGIN
        )
}

/// Subscribes to the process-wide framework (once per process image; a
/// forked child inherits the subscription).
pub fn attach() {
    static ATTACHED: std::sync::Once = std::sync::Once::new();
    ATTACHED.call_once(|| {
        let framework = strobe_trace::global();
        framework.add_subscriber(Arc::new(RingSubscriber));
        framework.set_enabled(true);
    });
}
