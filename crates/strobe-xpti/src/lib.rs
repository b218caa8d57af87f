//! `strobe-xpti`: the XPTI C ABI (REFERENCE §7) over [`strobe_trace::global()`],
//! built as `libstrobe_xpti.so`, a drop-in dispatcher for
//! `XPTI_FRAMEWORK_DISPATCHER` and a library instrumented programs may link
//! directly. The C header is `include/xpti/xpti_trace_framework.h`.
//!
//! Every export catches panics (`catch_unwind`) and turns them into the
//! function's failure value; null pointers, unknown ids and empty names give
//! the documented result code, never a crash. This module owns the C
//! boundary only: it must never hold state of its own beyond the
//! framework-initialize reference count.

use std::ffi::{c_char, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};

use strobe_trace::types::{
    payload_flags, result, INVALID_OBJECT_ID, INVALID_STREAM_ID, INVALID_STRING_ID, UNKNOWN_LINE,
};
use strobe_trace::{global, result_code, EventData, ObjectData, Payload, PayloadSpec, RawCallback};

mod tracepoints;
pub use tracepoints::*;

/// Runs `f`, returning `fallback` if it panics.
#[inline(always)]
fn guard<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(fallback)
}

/// Bytes of a C string, `None` for null.
///
/// # Safety
/// `p` is null or a NUL-terminated string live for `'a`.
unsafe fn bytes<'a>(p: *const c_char) -> Option<&'a [u8]> {
    if p.is_null() {
        None
    } else {
        // SAFETY: per the function contract.
        Some(unsafe { CStr::from_ptr(p) }.to_bytes())
    }
}

static FRAMEWORK_REFS: AtomicU64 = AtomicU64::new(0);

/// The framework's own stream, announced to the subscribers when a runtime
/// first initializes the framework and finished when the last reference
/// goes, as Intel's framework does.
const FRAMEWORK_STREAM: &[u8] = b"xpti.framework";

/// Starts the framework (reference counted). Declared `void` in the
/// header, but proxies call it through a pointer type returning
/// `xpti::result_t`: it answers SUCCESS for them.
#[no_mangle]
pub extern "C" fn xptiFrameworkInitialize() -> i32 {
    guard(result::FAIL, || {
        if FRAMEWORK_REFS.fetch_add(1, Ordering::AcqRel) == 0 {
            let _ = global().initialize_stream(FRAMEWORK_STREAM, 1, 0, b"1.0");
        }
        result::SUCCESS
    })
}

/// Drops one framework reference (SUCCESS, as for initialize).
#[no_mangle]
pub extern "C" fn xptiFrameworkFinalize() -> i32 {
    guard(result::FAIL, || {
        let before =
            FRAMEWORK_REFS.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
        if before == Ok(1) {
            let _ = global().finalize_stream(FRAMEWORK_STREAM);
        }
        result::SUCCESS
    })
}

/// Announces a stream to every subscriber.
///
/// # Safety
/// String arguments are null or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn xptiInitialize(
    stream: *const c_char,
    major: u32,
    minor: u32,
    version: *const c_char,
) -> i32 {
    guard(result::FAIL, || {
        // SAFETY: caller contract.
        let Some(name) = (unsafe { bytes(stream) }) else {
            return result::INVALIDARG;
        };
        // SAFETY: caller contract.
        let version = unsafe { bytes(version) }.unwrap_or(b"");
        result_code(global().initialize_stream(name, major, minor, version))
    })
}

/// Tells every subscriber that a stream ends.
///
/// # Safety
/// `stream` is null or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn xptiFinalize(stream: *const c_char) {
    guard((), || {
        // SAFETY: caller contract.
        if let Some(name) = unsafe { bytes(stream) } {
            let _ = global().finalize_stream(name);
        }
    })
}

/// Whether tracing is on (one atomic load once the framework exists).
#[no_mangle]
pub extern "C" fn xptiTraceEnabled() -> bool {
    guard(false, strobe_trace::trace_enabled)
}

/// Whether tracing is on and (stream, type) has a callback (type 0 = any).
#[no_mangle]
pub extern "C" fn xptiCheckTraceEnabled(stream: u8, trace_type: u16) -> bool {
    guard(false, || global().check_trace_enabled(stream, trace_type))
}

/// Stream id of a name ([`INVALID_STREAM_ID`], 255, on error).
///
/// # Safety
/// `name` is null or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn xptiRegisterStream(name: *const c_char) -> u8 {
    guard(INVALID_STREAM_ID, || {
        // SAFETY: caller contract.
        unsafe { bytes(name) }
            .and_then(|n| global().register_stream(n).ok())
            .unwrap_or(INVALID_STREAM_ID)
    })
}

/// Removes a stream's callbacks.
///
/// # Safety
/// `name` is null or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn xptiUnregisterStream(name: *const c_char) -> i32 {
    guard(result::FAIL, || {
        // SAFETY: caller contract.
        match unsafe { bytes(name) } {
            None => result::INVALIDARG,
            Some(n) => result_code(global().unregister_stream(n)),
        }
    })
}

/// Interns a string; both arguments are required (Intel's framework
/// answers [`INVALID_STRING_ID`] without a place for the stored string).
///
/// # Safety
/// `s` is null or NUL-terminated; `table_string` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn xptiRegisterString(
    s: *const c_char,
    table_string: *mut *mut c_char,
) -> u32 {
    guard(INVALID_STRING_ID, || {
        if table_string.is_null() {
            return INVALID_STRING_ID;
        }
        // SAFETY: caller contract.
        unsafe { intern(s, &mut *table_string) }
    })
}

/// Interns `s`, storing the table's copy in `stored`.
///
/// # Safety
/// `s` is null or NUL-terminated.
unsafe fn intern(s: *const c_char, stored: &mut *mut c_char) -> u32 {
    // SAFETY: per the function contract.
    let Some(b) = (unsafe { bytes(s) }) else {
        return INVALID_STRING_ID;
    };
    match global().register_string(b) {
        Ok((id, table)) => {
            *stored = table.as_ptr() as *mut c_char;
            id
        }
        Err(_) => INVALID_STRING_ID,
    }
}

/// The string id of `s` for strobe's own C++ half (which has no use for the
/// stored copy).
///
/// # Safety
/// `s` is null or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn strobe_xpti_intern(s: *const c_char) -> u32 {
    let mut stored = std::ptr::null_mut();
    // SAFETY: per the function contract.
    guard(INVALID_STRING_ID, || unsafe { intern(s, &mut stored) })
}

/// The stored string of an id, or null.
#[no_mangle]
pub extern "C" fn xptiLookupString(id: u32) -> *const c_char {
    guard(std::ptr::null(), || {
        global()
            .lookup_string(id)
            .map_or(std::ptr::null(), CStr::as_ptr)
    })
}

/// Stores an object (metadata value).
///
/// # Safety
/// `data` is null or points at `size` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn xptiRegisterObject(data: *const c_char, size: usize, kind: u8) -> i32 {
    guard(INVALID_OBJECT_ID, || {
        if data.is_null() {
            return INVALID_OBJECT_ID;
        }
        // SAFETY: caller contract: `size` readable bytes at `data`.
        let slice = unsafe { std::slice::from_raw_parts(data as *const u8, size) };
        global()
            .register_object(slice, kind)
            .unwrap_or(INVALID_OBJECT_ID)
    })
}

/// The object of an id; all zero when unknown.
#[no_mangle]
pub extern "C" fn xptiLookupObject(id: i32) -> ObjectData {
    let none = ObjectData {
        size: 0,
        data: std::ptr::null(),
        type_: 0,
    };
    guard(none, || match global().lookup_object(id) {
        Some(o) => ObjectData {
            size: o.data.len(),
            data: o.data.as_ptr() as *const c_char,
            type_: o.kind,
        },
        None => none,
    })
}

/// Reads a C payload into a spec.
///
/// # Safety
/// `p` points at a valid payload whose strings are null or NUL-terminated.
unsafe fn spec_of<'a>(p: &'a Payload, fallback_name: Option<&'a [u8]>) -> PayloadSpec<'a> {
    // SAFETY: per the function contract.
    let name = unsafe { bytes(p.name) }.or(fallback_name);
    // SAFETY: per the function contract.
    let file = unsafe { bytes(p.source_file) };
    let line = (p.flags & payload_flags::LINE != 0
        || (file.is_some() && p.line_no != UNKNOWN_LINE))
        .then_some(p.line_no)
        .filter(|l| *l != UNKNOWN_LINE);
    let column = (p.flags & payload_flags::COLUMN != 0
        || (file.is_some() && p.column_no != UNKNOWN_LINE))
        .then_some(p.column_no)
        .filter(|c| *c != UNKNOWN_LINE);
    PayloadSpec {
        name,
        source_file: file,
        line,
        column,
        code_ptr: (!p.code_ptr_va.is_null()).then_some(p.code_ptr_va as usize),
    }
}

/// Registers a payload; returns its unique id (0 on error) and records it in
/// the caller's payload.
///
/// # Safety
/// `payload` is null or a valid, writable payload.
#[no_mangle]
pub unsafe extern "C" fn xptiRegisterPayload(payload: *mut Payload) -> u64 {
    guard(0, || {
        // SAFETY: caller contract.
        let Some(p) = (unsafe { payload.as_mut() }) else {
            return 0;
        };
        // SAFETY: caller contract.
        let spec = unsafe { spec_of(p, None) };
        match global().register_payload(&spec) {
            Ok(uid) => {
                p.internal = uid;
                p.flags |= payload_flags::HASH_AVAILABLE | payload_flags::REGISTERED;
                uid
            }
            Err(_) => 0,
        }
    })
}

/// Makes or finds the event of a payload.
///
/// # Safety
/// `name` null or NUL-terminated; `payload` null or a valid writable
/// payload; `instance_no` null or writable.
#[no_mangle]
pub unsafe extern "C" fn xptiMakeEvent(
    name: *const c_char,
    payload: *mut Payload,
    event_type: u16,
    activity: u16,
    instance_no: *mut u64,
) -> *mut EventData {
    guard(std::ptr::null_mut(), || {
        // Intel's framework needs both the payload and the place for the
        // instance number.
        if payload.is_null() || instance_no.is_null() {
            return std::ptr::null_mut();
        }
        // SAFETY: caller contract.
        let name = unsafe { bytes(name) };
        // SAFETY: caller contract (non-null).
        let p: &Payload = unsafe { &*payload };
        // SAFETY: caller contract.
        let spec = unsafe { spec_of(p, name) };
        match global().make_event(&spec, event_type, activity) {
            Ok((ev, instance)) => {
                // SAFETY: non-null, writable out-pointers per caller contract.
                unsafe {
                    *instance_no = instance;
                    (*payload).internal = ev.unique_id;
                    (*payload).flags |= payload_flags::HASH_AVAILABLE | payload_flags::REGISTERED;
                }
                ev.as_ptr()
            }
            Err(_) => std::ptr::null_mut(),
        }
    })
}

/// The event of a unique id (an `xptiMakeEvent` event or a live
/// tracepoint's), or null.
#[no_mangle]
pub extern "C" fn xptiFindEvent(uid: u64) -> *const EventData {
    guard(std::ptr::null(), || {
        global()
            .find_event(uid)
            .map_or_else(|| tracepoints::tracepoint_event(uid), |e| e.as_ptr())
    })
}

/// The payload of an event, or null.
///
/// # Safety
/// `event` is null or a valid event.
#[no_mangle]
pub unsafe extern "C" fn xptiQueryPayload(event: *mut EventData) -> *const Payload {
    guard(std::ptr::null(), || {
        // SAFETY: caller contract.
        unsafe { event.as_ref() }.map_or(std::ptr::null(), |e| e.reserved.payload as *const Payload)
    })
}

/// The payload registered under a unique id, or null.
#[no_mangle]
pub extern "C" fn xptiQueryPayloadByUID(uid: u64) -> *const Payload {
    guard(std::ptr::null(), || {
        global().query_payload(uid).map_or_else(
            || tracepoints::tracepoint_payload(uid) as *const Payload,
            |p| p as *const Payload,
        )
    })
}

/// Events live for the process: nothing to release.
#[no_mangle]
pub extern "C" fn xptiReleaseEvent(_event: *mut EventData) {}

/// Registers a callback for (stream, type).
#[no_mangle]
pub extern "C" fn xptiRegisterCallback(
    stream: u8,
    trace_type: u16,
    cb: Option<RawCallback>,
) -> i32 {
    guard(result::FAIL, || match cb {
        None => result::INVALIDARG,
        Some(cb) => result_code(global().register_raw_callback(stream, trace_type, cb)),
    })
}

/// Unregisters a callback for (stream, type).
#[no_mangle]
pub extern "C" fn xptiUnregisterCallback(
    stream: u8,
    trace_type: u16,
    cb: Option<RawCallback>,
) -> i32 {
    guard(result::FAIL, || match cb {
        None => result::INVALIDARG,
        Some(cb) => result_code(global().unregister_raw_callback(stream, trace_type, cb)),
    })
}

/// Notifies the callbacks of (stream, type).
///
/// # Safety
/// `parent` and `event` are null or valid events for the call.
#[no_mangle]
pub unsafe extern "C" fn xptiNotifySubscribers(
    stream: u8,
    trace_type: u16,
    parent: *mut EventData,
    event: *mut EventData,
    instance: u64,
    user_data: *const c_void,
) -> i32 {
    guard(result::FAIL, || {
        // SAFETY: caller contract.
        match unsafe { global().notify_raw(stream, trace_type, parent, event, instance, user_data) }
        {
            Ok(()) => result::SUCCESS,
            Err(e) => e.code(),
        }
    })
}

/// Attaches key = object to an event: in the event's metadata map (what
/// `xptiQueryMetadata` returns) and, for the framework's own events, beside
/// the event too (what the Rust API and `xptiStrobeMetadataAt` read).
///
/// # Safety
/// `event` null or valid; `key` null or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn xptiAddMetadata(
    event: *mut EventData,
    key: *const c_char,
    value: i32,
) -> i32 {
    guard(result::FAIL, || {
        // SAFETY: caller contract.
        let (Some(ev), Some(k)) = (unsafe { event.as_ref() }, unsafe { bytes(key) }) else {
            return result::INVALIDARG;
        };
        if global()
            .find_event(ev.unique_id)
            .is_some_and(|own| own.as_ptr() == event)
        {
            let rc = result_code(global().add_metadata(ev, k, value));
            if rc != result::SUCCESS {
                return rc;
            }
        }
        // SAFETY: a valid event and a NUL-terminated key.
        unsafe { tracepoints::map_add(event, key, value) }
    })
}

/// Number of metadata entries of an event (strobe extension).
///
/// # Safety
/// `event` null or valid.
#[no_mangle]
pub unsafe extern "C" fn xptiStrobeMetadataCount(event: *const EventData) -> u32 {
    guard(0, || {
        // SAFETY: caller contract.
        unsafe { event.as_ref() }
            .and_then(|e| global().metadata(e).ok())
            .map_or(0, |m| m.len() as u32)
    })
}

/// Metadata entry `index` of an event (strobe extension).
///
/// # Safety
/// `event` null or valid; `key`/`value` null or writable.
#[no_mangle]
pub unsafe extern "C" fn xptiStrobeMetadataAt(
    event: *const EventData,
    index: u32,
    key: *mut u32,
    value: *mut i32,
) -> i32 {
    guard(result::FAIL, || {
        // SAFETY: caller contract.
        let Some(ev) = (unsafe { event.as_ref() }) else {
            return result::INVALIDARG;
        };
        if key.is_null() || value.is_null() {
            return result::INVALIDARG;
        }
        match global().metadata(ev) {
            Err(e) => e.code(),
            Ok(md) => match md.get(index as usize) {
                None => result::NOTFOUND,
                Some(&(k, v)) => {
                    // SAFETY: non-null out-pointers per caller contract.
                    unsafe {
                        *key = k;
                        *value = v;
                    }
                    result::SUCCESS
                }
            },
        }
    })
}

/// A user-defined trace-point type (0 on error).
///
/// # Safety
/// `tool` null or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn xptiRegisterUserDefinedTracePoint(tool: *const c_char, value: u8) -> u16 {
    guard(0, || {
        // SAFETY: caller contract.
        unsafe { bytes(tool) }
            .and_then(|t| global().register_user_defined_trace_point(t, value).ok())
            .unwrap_or(0)
    })
}

/// A user-defined event type (0 on error).
///
/// # Safety
/// `tool` null or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn xptiRegisterUserDefinedEventType(tool: *const c_char, value: u8) -> u16 {
    guard(0, || {
        // SAFETY: caller contract.
        unsafe { bytes(tool) }
            .and_then(|t| global().register_user_defined_event_type(t, value).ok())
            .unwrap_or(0)
    })
}

/// The calling thread's universal id.
#[no_mangle]
pub extern "C" fn xptiGetUniversalId() -> u64 {
    guard(0, strobe_trace::thread_state::universal_id)
}

/// Sets the calling thread's universal id.
#[no_mangle]
pub extern "C" fn xptiSetUniversalId(uid: u64) {
    guard((), || strobe_trace::thread_state::set_universal_id(uid))
}

/// Stashes (key, value) on the calling thread (depth 1).
///
/// # Safety
/// `key` null or a NUL-terminated string that stays valid while stashed.
#[no_mangle]
pub unsafe extern "C" fn xptiStashTuple(key: *const c_char, value: u64) -> i32 {
    guard(result::FAIL, || {
        if key.is_null() {
            return result::INVALIDARG;
        }
        // SAFETY: the caller keeps the key alive while it is stashed (the
        // XPTI contract); the 'static lifetime is never relied on past that.
        let k: &'static CStr = unsafe { CStr::from_ptr(key) };
        result_code(strobe_trace::thread_state::stash_tuple(k, value))
    })
}

/// The calling thread's stashed tuple.
///
/// # Safety
/// `key` and `value` null or writable.
#[no_mangle]
pub unsafe extern "C" fn xptiGetStashedTuple(key: *mut *mut c_char, value: *mut u64) -> i32 {
    guard(result::FAIL, || {
        if key.is_null() || value.is_null() {
            return result::INVALIDARG;
        }
        match strobe_trace::thread_state::stashed_tuple() {
            Ok((k, v)) => {
                // SAFETY: non-null out-pointers per caller contract.
                unsafe {
                    *key = k.as_ptr() as *mut c_char;
                    *value = v;
                }
                result::SUCCESS
            }
            Err(e) => e.code(),
        }
    })
}

/// Drops the calling thread's stashed tuple.
#[no_mangle]
pub extern "C" fn xptiUnstashTuple() {
    guard((), strobe_trace::thread_state::unstash_tuple)
}

/// A process-wide increasing id.
#[no_mangle]
pub extern "C" fn xptiGetUniqueId() -> u64 {
    guard(0, || global().next_unique_id())
}

/// Starts over with empty tables (tests only).
#[no_mangle]
pub extern "C" fn xptiReset() {
    guard((), strobe_trace::reset_global)
}

/// Forces tracing on or off (tests only).
#[no_mangle]
pub extern "C" fn xptiForceSetTraceEnabled(on: bool) {
    guard((), || global().set_enabled(on))
}
