//! The runtime as a standard C-ABI XPTI subscriber: `libstrobe_runtime.so`
//! exports `xptiTraceInit` and `xptiTraceFinish`, so that a dispatcher
//! (strobe's `libstrobe_xpti.so` or Intel's `libxptifw.so`) that finds the
//! runtime in `XPTI_SUBSCRIBERS` (`strobe sample --xpti` puts it there)
//! hands it the notifications of XPTI-instrumented C and C++ runtimes
//! (SYCL, Unified Runtime).
//!
//! Owns finding the dispatcher that announces a stream
//! (`XPTI_FRAMEWORK_DISPATCHER`, opened with `RTLD_NOLOAD`, else the
//! process's global symbols), the table of streams subscribed to (one
//! callback function per table slot: an XPTI callback is not told its
//! stream), and what the collector learns about them: each stream's name,
//! and a dispatcher that could not be found (then nothing is subscribed).
//! Notifications go through [`crate::tracing::record`].
//!
//! Never loads a library (`RTLD_NOLOAD` only) and never unloads one;
//! never calls the dispatcher from a notification except
//! `xptiQueryPayload` for an event without a payload pointer; never runs
//! in a signal handler; subscribes nothing in a process that does not
//! collect tracing, and records nothing while the runtime is not
//! collecting (each notification then costs one atomic load).

use crate::events::emit;
use crate::state::{current, Runtime};
use crate::thread_slot::slot_of_current_thread;
use crate::tracing::{record, Notice};
use std::borrow::Cow;
use std::ffi::{c_char, c_void, CStr, CString};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::OnceLock;
use strobe_trace::types::trace_point;
use strobe_trace::{EventData, Payload};
use strobe_wire::record::{event, XPTI_C_STREAM};

/// A tracepoint callback (`xpti::tracepoint_callback_api_t`).
type Callback = extern "C" fn(u16, *mut EventData, *mut EventData, u64, *const c_void);
type RegisterStream = unsafe extern "C" fn(*const c_char) -> u8;
type RegisterCallback = unsafe extern "C" fn(u8, u16, Callback) -> i32;
type QueryPayload = unsafe extern "C" fn(*mut EventData) -> *const Payload;

/// The dispatcher's functions the runtime calls.
struct Dispatcher {
    register_stream: RegisterStream,
    register_callback: RegisterCallback,
    /// Absent: the payload is read from `event->reserved.payload`.
    query_payload: Option<QueryPayload>,
}

static DISPATCHER: OnceLock<Dispatcher> = OnceLock::new();

/// Why the dispatcher could not be found, and the stream it announced.
static MISSING: OnceLock<(CString, String)> = OnceLock::new();

/// Most streams subscribed to (SYCL and Unified Runtime use a handful);
/// later ones are left alone.
const SLOTS: usize = 64;

/// A subscribed stream.
struct Stream {
    id: u8,
    name: CString,
}

/// One slot of the stream table: `tag` is 0 while free, else
/// `0x100 | stream id` (claimed with a compare-and-swap, no lock, so a
/// forked child can always go on); `stream` is set just after the claim.
struct Slot {
    tag: AtomicU16,
    stream: OnceLock<Stream>,
}

static STREAMS: [Slot; SLOTS] = [const {
    Slot {
        tag: AtomicU16::new(0),
        stream: OnceLock::new(),
    }
}; SLOTS];

/// Slot `SLOT`'s callback.
extern "C" fn on_notify<const SLOT: usize>(
    trace_type: u16,
    parent: *mut EventData,
    event: *mut EventData,
    instance: u64,
    user_data: *const c_void,
) {
    if current().is_none() {
        return;
    }
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        notified(SLOT, trace_type, parent, event, instance, user_data)
    }));
}

macro_rules! callbacks {
    ($($slot:literal)*) => { [$(on_notify::<$slot> as Callback),*] };
}

static CALLBACKS: [Callback; SLOTS] = callbacks!(
    0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
    32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61
    62 63
);

fn notified(
    slot: usize,
    trace_type: u16,
    parent: *mut EventData,
    event: *mut EventData,
    instance: u64,
    user_data: *const c_void,
) {
    let Some(stream) = STREAMS[slot].stream.get() else {
        return;
    };
    // SAFETY: the dispatcher passes null or events valid during the call.
    let (parent_ref, event_ref) = unsafe { (parent.as_ref(), event.as_ref()) };
    let notice = Notice {
        stream: XPTI_C_STREAM | u32::from(stream.id),
        trace_type,
        parent_uid: parent_ref.map_or(0, |e| e.unique_id),
        event_uid: event_ref.map_or(0, |e| e.unique_id),
        instance,
        user_data,
    };
    record(notice, &|| payload_name(event), &|| {
        Some(Cow::Borrowed(stream.name.as_c_str()))
    });
}

/// The name in `event`'s payload: `event->reserved.payload` (one load, on
/// every notification), else what the dispatcher's `xptiQueryPayload`
/// answers.
fn payload_name<'n>(event: *mut EventData) -> Option<&'n CStr> {
    if event.is_null() {
        return None;
    }
    // SAFETY: a non-null event of the dispatcher, valid during the
    // notification; the payload pointer is the first reserved field in
    // both dispatchers' layouts.
    let mut payload = unsafe { (*event).reserved.payload as *const Payload };
    if payload.is_null() {
        if let Some(query) = DISPATCHER.get().and_then(|d| d.query_payload) {
            // SAFETY: as above.
            payload = unsafe { query(event) };
        }
    }
    // SAFETY: null or the dispatcher's payload, whose name is null or a
    // NUL-terminated string that outlives the notification.
    unsafe { payload.as_ref() }.and_then(Payload::name)
}

/// Called by the dispatcher once per stream it initializes.
///
/// # Safety
/// `stream_name` is null or a NUL-terminated string; the other arguments
/// are not read.
#[no_mangle]
pub unsafe extern "C" fn xptiTraceInit(
    _major: u32,
    _minor: u32,
    _version: *const c_char,
    stream_name: *const c_char,
) {
    if stream_name.is_null() {
        return;
    }
    // SAFETY: NUL-terminated (contract).
    let name = unsafe { CStr::from_ptr(stream_name) };
    let _ = std::panic::catch_unwind(|| init(name));
}

/// Called by the dispatcher when a stream ends. The callbacks stay
/// registered: a stream initialized again keeps its slot.
///
/// # Safety
/// Nothing is read.
#[no_mangle]
pub unsafe extern "C" fn xptiTraceFinish(_stream_name: *const c_char) {}

fn init(name: &CStr) {
    if !crate::start::collects_tracing() {
        return;
    }
    let dispatcher = match dispatcher() {
        Ok(d) => d,
        Err(why) => {
            let _ = MISSING.set((name.to_owned(), why));
            if let Some(rt) = current() {
                announce(rt);
            }
            return;
        }
    };
    // SAFETY: the dispatcher's xptiRegisterStream with a valid C string.
    let id = unsafe { (dispatcher.register_stream)(name.as_ptr()) };
    // XPTI's invalid stream id (`invalid_id<uint8_t>`); 0 may be a valid one.
    if id == u8::MAX {
        return;
    }
    let Some(slot) = claim(id, name) else {
        crate::log::log_at!(
            1,
            "XPTI stream {} is not recorded: more than {SLOTS} streams",
            name.to_string_lossy()
        );
        return;
    };
    for &trace_type in trace_point::ALL_PREDEFINED {
        // SAFETY: the dispatcher's xptiRegisterCallback with a callback
        // that lives as long as the process (a repeat is DUPLICATE, harmless).
        unsafe { (dispatcher.register_callback)(id, trace_type, CALLBACKS[slot]) };
    }
    if let Some(rt) = current() {
        announce(rt);
    }
}

/// The slot of stream `id`, claimed now if it has none; `None` when the
/// table is full.
fn claim(id: u8, name: &CStr) -> Option<usize> {
    let tag = 0x100 | u16::from(id);
    for (i, slot) in STREAMS.iter().enumerate() {
        match slot
            .tag
            .compare_exchange(0, tag, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => {
                let _ = slot.stream.set(Stream {
                    id,
                    name: name.to_owned(),
                });
                return Some(i);
            }
            Err(held) if held == tag => return Some(i),
            Err(_) => {}
        }
    }
    None
}

/// The dispatcher that is calling: the library `XPTI_FRAMEWORK_DISPATCHER`
/// names, if it is loaded, else the process's global symbols (a program
/// linked with its dispatcher). Found once; an error says why not.
fn dispatcher() -> Result<&'static Dispatcher, String> {
    if let Some(d) = DISPATCHER.get() {
        return Ok(d);
    }
    let named = std::env::var_os(strobe_trace::ENV_DISPATCHER).filter(|p| !p.is_empty());
    let mut why = match &named {
        None => format!("{} is not set", strobe_trace::ENV_DISPATCHER),
        Some(path) => format!(
            "{}={} is not loaded",
            strobe_trace::ENV_DISPATCHER,
            path.to_string_lossy()
        ),
    };
    let handle = named
        .and_then(|p| CString::new(p.into_encoded_bytes()).ok())
        // SAFETY: dlopen with a valid C string; RTLD_NOLOAD never loads
        // anything, it only finds a library already loaded (and keeps it
        // loaded: the runtime holds its functions).
        .map(|p| unsafe { libc::dlopen(p.as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY) })
        .filter(|h| !h.is_null());
    for source in [handle, Some(libc::RTLD_DEFAULT)].into_iter().flatten() {
        match functions(source) {
            Some(d) => return Ok(DISPATCHER.get_or_init(|| d)),
            None if source != libc::RTLD_DEFAULT => {
                why = format!(
                    "the library {} names lacks xptiRegisterStream or xptiRegisterCallback",
                    strobe_trace::ENV_DISPATCHER
                );
            }
            None => {}
        }
    }
    Err(why)
}

/// The dispatcher functions `handle` (a `dlopen` handle or
/// `RTLD_DEFAULT`) resolves, if it has the two that are needed.
fn functions(handle: *mut c_void) -> Option<Dispatcher> {
    let find = |name: &CStr| {
        // SAFETY: dlsym with a valid handle and name.
        let p = unsafe { libc::dlsym(handle, name.as_ptr()) };
        (!p.is_null()).then_some(p)
    };
    let register_stream = find(c"xptiRegisterStream")?;
    let register_callback = find(c"xptiRegisterCallback")?;
    let query_payload = find(c"xptiQueryPayload");
    // SAFETY: the XPTI C ABI's signatures of these functions.
    unsafe {
        Some(Dispatcher {
            register_stream: std::mem::transmute::<*mut c_void, RegisterStream>(register_stream),
            register_callback: std::mem::transmute::<*mut c_void, RegisterCallback>(
                register_callback,
            ),
            query_payload: query_payload
                .map(|p| std::mem::transmute::<*mut c_void, QueryPayload>(p)),
        })
    }
}

/// Tells the collector, through the calling thread's ring, every stream
/// subscribed to so far and a dispatcher that could not be found (at
/// start-up for what happened before, and as it happens). Repeats are
/// harmless.
pub fn announce(rt: &Runtime) {
    if !rt.config.tracing {
        return;
    }
    let missing = MISSING.get();
    let any = STREAMS.iter().any(|s| s.stream.get().is_some());
    if missing.is_none() && !any {
        return;
    }
    let Some(slot) = slot_of_current_thread(rt) else {
        return;
    };
    for s in STREAMS.iter().filter_map(|s| s.stream.get()) {
        let id = XPTI_C_STREAM | u32::from(s.id);
        emit(rt, slot, event::XPTI_STREAM, id, 0, s.name.to_bytes());
    }
    if let Some((stream, why)) = missing {
        let mut bytes = stream.to_bytes_with_nul().to_vec();
        bytes.extend_from_slice(why.as_bytes());
        emit(rt, slot, event::XPTI_STREAM, 0, 0, &bytes);
    }
}
