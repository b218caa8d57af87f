//! The XPTI 2026.2 additions to the C ABI: tracepoints (C++ interface objects
//! made in `cxx/objects.cpp`), tracepoint scopes, event and payload lookup by
//! id, the metadata map, default stream / event / trace types and stream
//! detail levels.
//!
//! Owns the exports and the small global state they keep (defaults, the
//! self-notification flag, detail levels read from subscribers). It must
//! never build or free an interface object itself: those belong to the C++
//! half, which this module reaches through `ffi`.

use std::ffi::{c_char, c_void};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU8, Ordering};
use std::sync::OnceLock;

use strobe_trace::types::{result, trace_point, INVALID_STREAM_ID};
use strobe_trace::{global, EventData, Payload};

use crate::guard;

/// The C++ half (`cxx/objects.cpp`). Interface pointers are opaque here.
mod ffi {
    use std::ffi::{c_char, c_void};
    use strobe_trace::{EventData, Payload};

    extern "C" {
        pub fn strobe_xpti_tp_create(
            func: *const c_char,
            file: *const c_char,
            line: u32,
            col: u32,
            code_ptr: *mut c_void,
        ) -> *mut c_void;
        pub fn strobe_xpti_tp_delete(tp: *mut c_void) -> i32;
        pub fn strobe_xpti_tp_register_scope(
            func: *const c_char,
            file: *const c_char,
            line: u32,
            col: u32,
            code_ptr: *mut c_void,
        ) -> *const c_void;
        pub fn strobe_xpti_scope_get() -> *const c_void;
        pub fn strobe_xpti_scope_set(tp: *mut c_void) -> i32;
        pub fn strobe_xpti_scope_unset();
        pub fn strobe_xpti_tp_event(uid: u64) -> *mut EventData;
        pub fn strobe_xpti_tp_payload(uid: u64) -> *mut Payload;
        pub fn strobe_xpti_lookup_event(
            uid: u64,
            event: *const EventData,
            payload: *const Payload,
        ) -> *const c_void;
        pub fn strobe_xpti_lookup_payload(
            uid: u64,
            event: *const EventData,
            payload: *const Payload,
        ) -> *const c_void;
        pub fn strobe_xpti_md_add(event: *mut EventData, key: *const c_char, value: i32) -> i32;
        pub fn strobe_xpti_md_query(event: *mut EventData) -> *mut c_void;
    }
}

/// The event of a live tracepoint id, or null.
pub(crate) fn tracepoint_event(uid: u64) -> *mut EventData {
    // SAFETY: the C++ side validates the id against its slabs.
    unsafe { ffi::strobe_xpti_tp_event(uid) }
}

/// The payload of a live tracepoint id, or null.
pub(crate) fn tracepoint_payload(uid: u64) -> *mut Payload {
    // SAFETY: as above.
    unsafe { ffi::strobe_xpti_tp_payload(uid) }
}

/// Adds key = value to the event's metadata map.
///
/// # Safety
/// `event` is a valid event; `key` NUL-terminated.
pub(crate) unsafe fn map_add(event: *mut EventData, key: *const c_char, value: i32) -> i32 {
    // SAFETY: per the function contract.
    unsafe { ffi::strobe_xpti_md_add(event, key, value) }
}

/// A new tracepoint (one instance of a code location): an
/// `xpti_tracepoint_t *` whose event, payload and metadata the caller reaches
/// through its interface; null when it cannot be made.
///
/// # Safety
/// `func_name` and `file_name` are null or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn xptiCreateTracepoint(
    func_name: *const c_char,
    file_name: *const c_char,
    line_no: u32,
    column_no: u32,
    code_ptr_va: *mut c_void,
) -> *mut c_void {
    // SAFETY: per the function contract; the C++ side catches its exceptions.
    unsafe { ffi::strobe_xpti_tp_create(func_name, file_name, line_no, column_no, code_ptr_va) }
}

/// Ends a tracepoint made by [`xptiCreateTracepoint`].
///
/// # Safety
/// `tp` is null or a pointer this library returned.
#[no_mangle]
pub unsafe extern "C" fn xptiDeleteTracepoint(tp: *mut c_void) -> i32 {
    // SAFETY: the C++ side validates `tp` before touching it.
    unsafe { ffi::strobe_xpti_tp_delete(tp) }
}

/// A tracepoint for a scope (kept for the thread until the scope sets it).
///
/// # Safety
/// As for [`xptiCreateTracepoint`].
#[no_mangle]
pub unsafe extern "C" fn xptiRegisterTracepointScope(
    func_name: *const c_char,
    file_name: *const c_char,
    line_no: u32,
    column_no: u32,
    code_ptr_va: *mut c_void,
) -> *const c_void {
    // SAFETY: per the function contract.
    unsafe {
        ffi::strobe_xpti_tp_register_scope(func_name, file_name, line_no, column_no, code_ptr_va)
    }
}

/// The calling thread's scope tracepoint, or null.
#[no_mangle]
pub extern "C" fn xptiGetTracepointScopeData() -> *const c_void {
    // SAFETY: reads a thread-local pointer.
    unsafe { ffi::strobe_xpti_scope_get() }
}

/// Sets the calling thread's scope tracepoint (and its universal id).
///
/// # Safety
/// `tp` is null or a live tracepoint interface.
#[no_mangle]
pub unsafe extern "C" fn xptiSetTracepointScopeData(tp: *mut c_void) -> i32 {
    // SAFETY: per the function contract.
    unsafe { ffi::strobe_xpti_scope_set(tp) }
}

/// Clears the calling thread's scope tracepoint and universal id.
#[no_mangle]
pub extern "C" fn xptiUnsetTracepointScopeData() {
    // SAFETY: writes thread-locals only.
    unsafe { ffi::strobe_xpti_scope_unset() }
}

/// The Rust framework's event and payload of an id (null when it has none).
fn framework_records(uid: u64) -> (*const EventData, *const Payload) {
    let event = global()
        .find_event(uid)
        .map_or(std::ptr::null(), |e| e as *const EventData);
    let payload = global()
        .query_payload(uid)
        .map_or(std::ptr::null(), |p| p as *const Payload);
    (event, payload)
}

/// The `xpti_trace_event_t *` of an id (a tracepoint or an event made by
/// `xptiMakeEvent`), or null.
#[no_mangle]
pub extern "C" fn xptiLookupEvent(uid: u64) -> *const c_void {
    guard(std::ptr::null(), || {
        let (event, payload) = framework_records(uid);
        // SAFETY: both pointers are null or framework-owned records that live
        // for the process.
        unsafe { ffi::strobe_xpti_lookup_event(uid, event, payload) }
    })
}

/// The `xpti_payload_t *` of an id, or null.
#[no_mangle]
pub extern "C" fn xptiLookupPayload(uid: u64) -> *const c_void {
    guard(std::ptr::null(), || {
        let (event, payload) = framework_records(uid);
        // SAFETY: as in `xptiLookupEvent`.
        unsafe { ffi::strobe_xpti_lookup_payload(uid, event, payload) }
    })
}

/// The event's metadata map (`xpti::metadata_t *`, a libstdc++
/// `unordered_map<uint32_t, int32_t>` in the event's reserved bytes), or
/// null for a null event.
///
/// # Safety
/// `event` is null or a valid, live event.
#[no_mangle]
pub unsafe extern "C" fn xptiQueryMetadata(event: *mut EventData) -> *mut c_void {
    guard(std::ptr::null_mut(), || {
        // SAFETY: caller contract.
        let Some(ev) = (unsafe { event.as_ref() }) else {
            return std::ptr::null_mut();
        };
        // Metadata added through the Rust API lives only beside the event:
        // copy it in (a key already in the map stays as it is).
        if let Ok(md) = global().metadata(ev) {
            for (key, value) in md {
                if let Some(k) = global().lookup_string(key) {
                    // SAFETY: a valid event and a NUL-terminated key.
                    let _ = unsafe { ffi::strobe_xpti_md_add(event, k.as_ptr(), value) };
                }
            }
        }
        // SAFETY: a valid event.
        unsafe { ffi::strobe_xpti_md_query(event) }
    })
}

static SCOPE_NOTIFY: AtomicBool = AtomicBool::new(false);
static DEFAULT_STREAM: AtomicU8 = AtomicU8::new(0);
static DEFAULT_EVENT_TYPE: AtomicU16 = AtomicU16::new(strobe_trace::types::event_type::ALGORITHM);
static DEFAULT_TRACE_TYPE: AtomicU16 = AtomicU16::new(trace_point::FUNCTION_BEGIN);

/// Whether tracepoint scopes notify their own begin and end.
#[no_mangle]
pub extern "C" fn xptiEnableTracepointScopeNotification(on: bool) {
    SCOPE_NOTIFY.store(on, Ordering::Relaxed);
}

/// See [`xptiEnableTracepointScopeNotification`] (off by default).
#[no_mangle]
pub extern "C" fn xptiCheckTracepointScopeNotification() -> bool {
    SCOPE_NOTIFY.load(Ordering::Relaxed)
}

/// The stream scoped notifications use (0 until set).
#[no_mangle]
pub extern "C" fn xptiGetDefaultStreamID() -> u8 {
    DEFAULT_STREAM.load(Ordering::Relaxed)
}

/// Sets the default stream; ids ≥ 128 are refused, as by Intel's framework.
#[no_mangle]
pub extern "C" fn xptiSetDefaultStreamID(stream: u8) -> i32 {
    if (stream as i8) < 0 {
        return result::INVALIDARG;
    }
    DEFAULT_STREAM.store(stream, Ordering::Relaxed);
    result::SUCCESS
}

/// The default event type (`algorithm` until set).
#[no_mangle]
pub extern "C" fn xptiGetDefaultEventType() -> u16 {
    DEFAULT_EVENT_TYPE.load(Ordering::Relaxed)
}

/// Sets the default event type; `unknown_event` (0) is refused.
#[no_mangle]
pub extern "C" fn xptiSetDefaultEventType(event_type: u16) -> i32 {
    if event_type == 0 {
        return result::INVALIDARG;
    }
    DEFAULT_EVENT_TYPE.store(event_type, Ordering::Relaxed);
    result::SUCCESS
}

/// The default trace-point type (`function_begin` until set).
#[no_mangle]
pub extern "C" fn xptiGetDefaultTraceType() -> u16 {
    DEFAULT_TRACE_TYPE.load(Ordering::Relaxed)
}

/// Sets the default trace-point type; `unknown_type` (0) is refused.
#[no_mangle]
pub extern "C" fn xptiSetDefaultTraceType(trace_type: u16) -> i32 {
    if trace_type == 0 {
        return result::INVALIDARG;
    }
    DEFAULT_TRACE_TYPE.store(trace_type, Ordering::Relaxed);
    result::SUCCESS
}

/// `xpti::stream_detail_level_t`.
mod detail {
    pub const NORMAL: u8 = 2;
    pub const VERBOSE: u8 = 3;
}

/// A subscriber's optional answer to "how much detail on this stream".
type QueryDetail = unsafe extern "C" fn(stream: *const c_char, level: *mut u8) -> bool;

/// The detail-level queries of the subscribers in `XPTI_SUBSCRIBERS`, found
/// once (they are loaded before any stream can be asked about).
fn detail_queries() -> &'static [QueryDetail] {
    static QUERIES: OnceLock<Vec<QueryDetail>> = OnceLock::new();
    QUERIES.get_or_init(|| {
        let Some(list) = std::env::var_os(strobe_trace::ENV_SUBSCRIBERS) else {
            return Vec::new();
        };
        let list = list.to_string_lossy().into_owned();
        strobe_trace::subscriber::parse_subscriber_list(&list)
            .into_iter()
            .filter_map(|path| {
                let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
                // SAFETY: RTLD_NOLOAD only finds a library already loaded (the
                // handle is kept: the library stays loaded for the process).
                let handle =
                    unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
                if handle.is_null() {
                    return None;
                }
                // SAFETY: a valid handle and a NUL-terminated name.
                let sym = unsafe {
                    libc::dlsym(handle, c"xptiQuerySubscriberStreamDetailLevel".as_ptr())
                };
                // SAFETY: the symbol has the published signature.
                (!sym.is_null())
                    .then(|| unsafe { std::mem::transmute::<*mut c_void, QueryDetail>(sym) })
            })
            .collect()
    })
}

/// The detail level a stream's subscribers ask for (the most any asks;
/// `NORMAL` when none answers), cached per stream.
#[no_mangle]
pub extern "C" fn xptiGetEffectiveStreamDetailLevel(stream: u8) -> u8 {
    const UNSET: u8 = u8::MAX;
    static CACHE: [AtomicU8; 256] = [const { AtomicU8::new(UNSET) }; 256];
    let cached = CACHE[stream as usize].load(Ordering::Relaxed);
    if cached != UNSET {
        return cached;
    }
    let level = guard(detail::NORMAL, || {
        let Some(name) = (stream != 0 && stream != INVALID_STREAM_ID)
            .then(|| global().stream_name(stream))
            .flatten()
        else {
            return detail::NORMAL;
        };
        let mut best: Option<u8> = None;
        for query in detail_queries() {
            let mut level = 0u8;
            // SAFETY: the subscriber's function with a NUL-terminated name and
            // a writable level.
            if unsafe { query(name.as_ptr(), &mut level) } && level <= detail::VERBOSE {
                best = Some(best.map_or(level, |b| b.max(level)));
            }
        }
        best.unwrap_or(detail::NORMAL)
    });
    CACHE[stream as usize].store(level, Ordering::Relaxed);
    level
}
