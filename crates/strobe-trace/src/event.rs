//! The C-layout records shared with C code: `payload_t`, `trace_event_data_t`
//! and the legacy `uid_t` tuple (REFERENCE §7), plus safe accessors.
//!
//! Owns layouts only. It must never change a field's order or size: the
//! compile-time assertions at the bottom pin the x86-64 layout that
//! `include/xpti/xpti_data_types.h` declares.

use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use crate::types::{payload_flags, UNKNOWN_LINE};

/// Legacy 192-bit id tuple kept in the payload (`xpti::uid_t`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Uid {
    pub p1: u64,
    pub p2: u64,
    pub p3: u64,
}

/// Source description of a trace point (`xpti::payload_t`, 80 bytes).
///
/// Payloads stored by the framework point only at interned strings (stable
/// for the framework's lifetime). Payloads coming from C may point anywhere
/// the caller chose; the framework reads them only during the call.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Payload {
    /// Function, kernel or region name (NUL-terminated) or null.
    pub name: *const c_char,
    /// Optional stack trace text or null.
    pub stack_trace: *const c_char,
    /// Source file (NUL-terminated) or null.
    pub source_file: *const c_char,
    /// Line number, `u32::MAX` when unknown.
    pub line_no: u32,
    /// Column number, `u32::MAX` when unknown.
    pub column_no: u32,
    /// Code address describing the trace point, or null.
    pub code_ptr_va: *const c_void,
    /// The 64-bit unique id, once registered (`payload_flags::HASH_AVAILABLE`).
    pub internal: u64,
    /// Availability flags (`payload_flags`).
    pub flags: u64,
    /// Legacy id tuple.
    pub uid: Uid,
}

// SAFETY: a Payload is plain data; the pointers it holds are only read, and
// framework-owned payloads point at immutable interned strings.
unsafe impl Send for Payload {}
// SAFETY: as above; nothing in a Payload is mutated through a shared reference.
unsafe impl Sync for Payload {}

impl Default for Payload {
    fn default() -> Self {
        Payload {
            name: std::ptr::null(),
            stack_trace: std::ptr::null(),
            source_file: std::ptr::null(),
            line_no: UNKNOWN_LINE,
            column_no: UNKNOWN_LINE,
            code_ptr_va: std::ptr::null(),
            internal: 0,
            flags: 0,
            uid: Uid::default(),
        }
    }
}

/// Reads an optional C string.
///
/// # Safety
/// `p` must be null or point at a NUL-terminated string valid for `'a`.
unsafe fn opt_cstr<'a>(p: *const c_char) -> Option<&'a CStr> {
    if p.is_null() {
        None
    } else {
        // SAFETY: non-null and NUL-terminated per the caller's contract.
        Some(unsafe { CStr::from_ptr(p) })
    }
}

impl Payload {
    /// The name, when present. Framework-owned payloads always hold valid
    /// strings; for a payload built by hand the caller vouches for its pointers.
    pub fn name(&self) -> Option<&CStr> {
        // SAFETY: see the method documentation: the pointers of a payload
        // are valid NUL-terminated strings or null by construction.
        unsafe { opt_cstr(self.name) }
    }
    /// The source file, when present.
    pub fn source_file(&self) -> Option<&CStr> {
        // SAFETY: as for `name`.
        unsafe { opt_cstr(self.source_file) }
    }
    /// The line number, when known.
    pub fn line(&self) -> Option<u32> {
        (self.flags & payload_flags::LINE != 0 && self.line_no != UNKNOWN_LINE)
            .then_some(self.line_no)
    }
    /// The column number, when known.
    pub fn column(&self) -> Option<u32> {
        (self.flags & payload_flags::COLUMN != 0 && self.column_no != UNKNOWN_LINE)
            .then_some(self.column_no)
    }
    /// The code address, when present.
    pub fn code_ptr(&self) -> Option<usize> {
        (!self.code_ptr_va.is_null()).then_some(self.code_ptr_va as usize)
    }
    /// The 64-bit unique id, when the payload has been registered.
    pub fn unique_id(&self) -> Option<u64> {
        (self.flags & payload_flags::HASH_AVAILABLE != 0).then_some(self.internal)
    }
}

/// The reserved block of an event: its payload pointer and 56 bytes the
/// dispatcher owns (upstream keeps a C++ map there; strobe keeps metadata
/// beside the event instead and leaves these bytes zero).
#[repr(C)]
#[derive(Debug)]
pub struct Reserved {
    /// The payload this event was made from (framework-owned for framework
    /// events).
    pub payload: *mut Payload,
    /// Opaque bytes owned by the dispatcher.
    pub opaque: [u8; 56],
}

/// A trace-point event (`xpti::trace_event_data_t`, 128 bytes).
///
/// Events made by the framework live as long as the framework (the global
/// one: the whole process) and are shared by every thread: the instance
/// counter and the global user data are atomics for that reason.
#[repr(C)]
#[derive(Debug)]
pub struct EventData {
    /// The 64-bit unique id (never a heap address; see [`crate::Framework::make_event`]).
    pub unique_id: u64,
    /// Data id (user-defined; 0 unless set by the instrumentation).
    pub data_id: u64,
    /// Instance number of the most recent visit (`make_event` bumps it).
    pub instance_id: AtomicU64,
    /// Event type (`event_type` or a user-defined code).
    pub event_type: u16,
    /// Activity type (`activity`).
    pub activity_type: u16,
    /// Padding.
    pub unused: u32,
    /// Source of an edge event.
    pub source_id: u64,
    /// Target of an edge event.
    pub target_id: u64,
    /// Payload pointer and dispatcher-owned bytes.
    pub reserved: Reserved,
    /// Tool data attached to the event for its whole life.
    pub global_user_data: AtomicPtr<c_void>,
    /// Availability flags (`event_flags`).
    pub flags: u64,
}

// SAFETY: the raw payload pointer targets framework-owned immutable data (or,
// for C-built events, data the C caller keeps alive); mutable fields are atomics.
unsafe impl Send for EventData {}
// SAFETY: as above.
unsafe impl Sync for EventData {}

impl EventData {
    /// An event with every field zero / null (what C code gets from `= {0}`).
    pub fn zeroed() -> Self {
        EventData {
            unique_id: 0,
            data_id: 0,
            instance_id: AtomicU64::new(0),
            event_type: 0,
            activity_type: 0,
            unused: 0,
            source_id: 0,
            target_id: 0,
            reserved: Reserved {
                payload: std::ptr::null_mut(),
                opaque: [0; 56],
            },
            global_user_data: AtomicPtr::new(std::ptr::null_mut()),
            flags: 0,
        }
    }

    /// The unique id.
    pub fn unique_id(&self) -> u64 {
        self.unique_id
    }
    /// The instance number of the latest visit.
    pub fn instance(&self) -> u64 {
        self.instance_id.load(Ordering::Relaxed)
    }
    /// The payload, when the event carries one.
    pub fn payload(&self) -> Option<&Payload> {
        // SAFETY: framework events point at their framework-owned payload,
        // which lives as long as the event; C-built events vouch for theirs.
        unsafe { self.reserved.payload.as_ref() }
    }
    /// The event as the raw pointer C callbacks receive.
    pub fn as_ptr(&self) -> *mut EventData {
        self as *const EventData as *mut EventData
    }
}

/// `object_data_t`, returned by value by `xptiLookupObject`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ObjectData {
    pub size: usize,
    pub data: *const c_char,
    pub type_: u8,
}

const _: () = assert!(std::mem::size_of::<Uid>() == 24);
const _: () = assert!(std::mem::size_of::<Payload>() == 80);
const _: () = assert!(std::mem::offset_of!(Payload, line_no) == 24);
const _: () = assert!(std::mem::offset_of!(Payload, code_ptr_va) == 32);
const _: () = assert!(std::mem::offset_of!(Payload, internal) == 40);
const _: () = assert!(std::mem::offset_of!(Payload, flags) == 48);
const _: () = assert!(std::mem::offset_of!(Payload, uid) == 56);
const _: () = assert!(std::mem::size_of::<EventData>() == 128);
const _: () = assert!(std::mem::offset_of!(EventData, instance_id) == 16);
const _: () = assert!(std::mem::offset_of!(EventData, event_type) == 24);
const _: () = assert!(std::mem::offset_of!(EventData, activity_type) == 26);
const _: () = assert!(std::mem::offset_of!(EventData, source_id) == 32);
const _: () = assert!(std::mem::offset_of!(EventData, reserved) == 48);
const _: () = assert!(std::mem::offset_of!(EventData, global_user_data) == 112);
const _: () = assert!(std::mem::offset_of!(EventData, flags) == 120);
const _: () = assert!(std::mem::size_of::<ObjectData>() == 24);
