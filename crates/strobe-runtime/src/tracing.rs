//! Tracing-framework notifications into the notifying thread's ring.
//!
//! Owns the runtime's subscriber to its own Rust framework
//! (`strobe_trace::global()` of this library) and [`record`], which every
//! notification goes through, from that framework or from a C-ABI XPTI
//! dispatcher (`xpti_subscriber`): each is written as one event naming its
//! event's name by a string id, preceded, the first time the thread meets
//! that name or the stream, by its text.
//! Never runs in a signal handler; records nothing while the runtime is
//! not collecting.

use crate::events::{emit, emit_now2};
use crate::state::{current, Runtime};
use crate::thread_slot::slot_of_current_thread;
use std::borrow::Cow;
use std::cell::Cell;
use std::ffi::{c_char, c_void, CStr};
use std::sync::Arc;
use strobe_buffer::record::XptiRecord;
use strobe_metrics::capi::region_kind;
use strobe_trace::subscriber::{StreamInit, Subscriber};
use strobe_trace::types::trace_point;
use strobe_trace::Framework;
use strobe_trace::Notification;
use strobe_wire::record::{as_bytes, event, XptiBody};

/// Words of the per-thread stream bitmap: a bit for every stream id of
/// both frameworks (1..=255, and the same with [`strobe_wire::record::XPTI_C_STREAM`] set).
const STREAM_WORDS: usize = 8;

thread_local! {
    /// Streams whose names this thread already wrote, with the runtime
    /// generation they were written for.
    static NAMED_STREAMS: Cell<([u64; STREAM_WORDS], u64)> =
        const { Cell::new(([0; STREAM_WORDS], 0)) };
}

struct RingSubscriber;

impl Subscriber for RingSubscriber {
    fn name(&self) -> &str {
        "strobe-runtime"
    }

    fn init(&self, framework: &Framework, stream: &StreamInit<'_>) {
        for &t in trace_point::ALL_PREDEFINED {
            let _ = framework.register_callback(stream.id, t, from_rust);
        }
    }

    fn finish(&self, _framework: &Framework, _stream_name: &CStr) {}
}

/// A notification of the runtime's own Rust framework.
fn from_rust(n: &Notification<'_>) {
    let notice = Notice {
        stream: u32::from(n.stream),
        trace_type: n.trace_type,
        parent_uid: n.parent.map_or(0, |e| e.unique_id),
        event_uid: n.event.map_or(0, |e| e.unique_id),
        instance: n.instance,
        user_data: n.user_data,
    };
    let uid = notice.event_uid;
    record(notice, &|| n.framework.query_payload(uid)?.name(), &|| {
        n.framework.stream_name(n.stream).map(Cow::Owned)
    });
}

/// One notification, whichever framework sent it: what the ring records.
#[derive(Debug, Clone, Copy)]
pub struct Notice {
    /// The stream's id as the ring carries it (C-ABI dispatcher streams
    /// have [`strobe_wire::record::XPTI_C_STREAM`] set).
    pub stream: u32,
    pub trace_type: u16,
    /// Unique id of the parent event (0: none).
    pub parent_uid: u64,
    /// Unique id of the event (0: none).
    pub event_uid: u64,
    pub instance: u64,
    /// Per-instance user data (valid during the notification only).
    pub user_data: *const c_void,
}

/// A name that `record` asks for only the first time the calling thread
/// meets an event or stream.
pub type NameOf<'a, 'n> = &'a dyn Fn() -> Option<Cow<'n, CStr>>;

/// Records a notification: the tool plugins' region callbacks around
/// task pairs, and the ring. `event_name` and `stream_name` are asked for
/// only when needed. Nothing happens while the runtime is not collecting.
pub fn record<'n>(
    mut n: Notice,
    event_name: &dyn Fn() -> Option<&'n CStr>,
    stream_name: NameOf<'_, 'n>,
) {
    let call = called_function(&n);
    if let Some((uid, _)) = call {
        n.event_uid = uid;
    }
    let event_name = || match call {
        Some((_, name)) => name,
        None => event_name(),
    };
    // A tool's group counts inside strobe's own begin and end records.
    if n.trace_type == trace_point::TASK_END {
        crate::metrics_abi::region_end(region_kind::XPTI_TASK);
    }
    record_in_ring(&n, &event_name, stream_name);
    if n.trace_type == trace_point::TASK_BEGIN {
        crate::metrics_abi::region_begin(region_kind::XPTI_TASK, event_name);
    }
}

/// XPTI's `function_with_args_t`, the user data of the
/// `function_with_args_begin/end` types.
#[repr(C)]
struct FunctionWithArgs {
    function_id: u32,
    function_name: *const c_char,
    args_data: *mut c_void,
    ret_data: *mut c_void,
    user_data: *mut c_void,
}

/// Marks the unique ids [`called_function`] makes up (the dispatchers'
/// own ids are small integers or hashes of payloads).
const CALL_UID: u64 = 1 << 63;

/// For a `function_with_args` notification (Unified Runtime's calls,
/// `ur.call` streams): an id per (stream, function id) and the function's
/// name, from the user data. The event, when there is one, names the
/// caller's code location, which the same call has from many places; the
/// region is named after the function called.
fn called_function<'n>(n: &Notice) -> Option<(u64, Option<&'n CStr>)> {
    if n.user_data.is_null() || n.trace_type & !1 != trace_point::FUNCTION_WITH_ARGS_BEGIN {
        return None;
    }
    // SAFETY: XPTI's contract for these types: the user data is a
    // `function_with_args_t`, valid during the notification.
    let call = unsafe { &*(n.user_data as *const FunctionWithArgs) };
    let name = (!call.function_name.is_null())
        // SAFETY: a NUL-terminated name (the same contract), read during
        // the notification.
        .then(|| unsafe { CStr::from_ptr(call.function_name) });
    let uid = CALL_UID | (u64::from(n.stream) << 32) | u64::from(call.function_id);
    Some((uid, name))
}

/// Writes the notification into the thread's ring (and hands it to tool
/// plugins), preceded the first time the thread meets its event's name or
/// its stream by their texts.
fn record_in_ring<'n>(
    n: &Notice,
    event_name: &dyn Fn() -> Option<&'n CStr>,
    stream_name: NameOf<'_, 'n>,
) {
    let Some(rt) = current().filter(|rt| rt.config.tracing) else {
        return;
    };
    let Some(slot) = slot_of_current_thread(rt) else {
        return;
    };
    if first_on_thread(rt, n.stream) {
        if let Some(name) = stream_name() {
            emit(rt, slot, event::XPTI_STREAM, n.stream, 0, name.to_bytes());
        }
    }
    // The name travels as one of the process's string ids (defined once
    // per thread and name, a cached pointer checked against its text):
    // some dispatchers' unique ids are addresses, which later events reuse.
    let name = event_name().map_or(0, |name| {
        // SAFETY: a NUL-terminated name.
        unsafe { crate::events::name_id(rt, slot, name.as_ptr()) }
    });
    let uid = n.event_uid;
    let body = XptiBody {
        unique_id: uid,
        parent_unique_id: n.parent_uid,
        instance: n.instance,
        user_data: n.user_data as u64,
        stream_id: n.stream,
        trace_type: n.trace_type,
        reserved: 0,
    };
    if rt.counters.is_some() && pairs(body.trace_type) {
        crate::counters::with_region_readings(rt.counters.as_ref(), slot, |readings| {
            emit_now2(rt, slot, event::XPTI, name, as_bytes(&body), readings)
        });
    } else {
        emit_now2(rt, slot, event::XPTI, name, as_bytes(&body), &[]);
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

/// Whether the calling thread meets `stream` for the first time under
/// `rt` (then its name goes first into the thread's ring, so the
/// collector knows it before the notifications).
fn first_on_thread(rt: &Runtime, stream: u32) -> bool {
    let bit = (stream as usize) % (64 * STREAM_WORDS);
    NAMED_STREAMS
        .try_with(|named| {
            let (mut words, generation) = named.get();
            if generation != rt.generation {
                words = [0; STREAM_WORDS];
            }
            let mask = 1u64 << (bit % 64);
            let first = words[bit / 64] & mask == 0;
            words[bit / 64] |= mask;
            named.set((words, rt.generation));
            first
        })
        .unwrap_or(false)
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

/// Subscribes to this library's own framework (once per process image; a
/// forked child inherits the subscription). The framework loads no
/// `XPTI_SUBSCRIBERS`: the runtime is not the program's dispatcher.
pub fn attach() {
    static ATTACHED: std::sync::Once = std::sync::Once::new();
    ATTACHED.call_once(|| {
        strobe_trace::skip_env_subscribers();
        let framework = strobe_trace::global();
        framework.add_subscriber(Arc::new(RingSubscriber));
        framework.set_enabled(true);
    });
}
