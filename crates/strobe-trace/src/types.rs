//! Numeric vocabulary of the framework: trace-point types, event types,
//! activity types, result codes, payload and event flags, and the encoding of
//! user-defined types (REFERENCE §2).
//!
//! Owns constants and pure bit arithmetic only; it must never hold state.
//! The trace-point codes and names are the record contract's
//! (`strobe_wire::trace_point`, re-exported as [`trace_point`]): event
//! records carry them to the collector.

/// Identifier of a registered stream (1..=254; 0 is never handed out and
/// [`INVALID_STREAM_ID`] means none).
pub type StreamId = u8;
/// Identifier of a string in the string table; [`INVALID_STRING_ID`] means none.
pub type StringId = u32;
/// Identifier of a registered object (metadata value); -1 means none.
pub type ObjectId = i32;

/// The stream id returned when registration fails (XPTI's
/// `invalid_id<uint8_t>`).
pub const INVALID_STREAM_ID: StreamId = u8::MAX;
/// The string id returned when registration fails.
pub const INVALID_STRING_ID: StringId = u32::MAX;
/// The object id returned when registration fails.
pub const INVALID_OBJECT_ID: ObjectId = -1;
/// The unique id that never names an event.
pub const INVALID_UID: u64 = 0;
/// Line or column number meaning "not known".
pub const UNKNOWN_LINE: u32 = u32::MAX;

/// Trace-point types (uint16): the codes and names are the record
/// contract's (`strobe_wire::trace_point`); which of them may carry a null
/// event is the framework's.
pub mod trace_point {
    pub use strobe_wire::trace_point::*;

    /// Whether a notification of this type may carry a null event (then it
    /// must carry user data): function, function_with_args, mem_alloc,
    /// mem_release, offload_alloc_* and diagnostics.
    pub fn allows_null_event(code: u16) -> bool {
        matches!(
            code,
            FUNCTION_BEGIN
                | FUNCTION_END
                | FUNCTION_WITH_ARGS_BEGIN
                | FUNCTION_WITH_ARGS_END
                | MEM_ALLOC_BEGIN
                | MEM_ALLOC_END
                | MEM_RELEASE_BEGIN
                | MEM_RELEASE_END
                | OFFLOAD_ALLOC_MEMORY_OBJECT_CONSTRUCT
                | OFFLOAD_ALLOC_MEMORY_OBJECT_DESTRUCT
                | OFFLOAD_ALLOC_MEMORY_OBJECT_ASSOCIATE
                | OFFLOAD_ALLOC_MEMORY_OBJECT_RELEASE
                | OFFLOAD_ALLOC_ACCESSOR
                | DIAGNOSTICS
        )
    }
}

/// Event types (uint16).
pub mod event_type {
    pub const UNKNOWN: u16 = 0;
    pub const GRAPH: u16 = 1;
    pub const ALGORITHM: u16 = 2;
    pub const BARRIER: u16 = 3;
    pub const SCHEDULER: u16 = 4;
    pub const ASYNC: u16 = 5;
    pub const LOCK: u16 = 6;
    pub const OFFLOAD_READ: u16 = 7;
    pub const OFFLOAD_WRITE: u16 = 8;
    pub const OFFLOAD_MEMORY_OBJECT: u16 = 9;
    pub const OFFLOAD_ACCESSOR: u16 = 10;
    pub const USER_DEFINED: u16 = 128;
}

/// Activity types (uint16).
pub mod activity {
    pub const UNKNOWN: u16 = 0;
    pub const ACTIVE: u16 = 1;
    pub const OVERHEAD: u16 = 2;
    pub const BACKGROUND: u16 = 4;
    pub const SLEEP: u16 = 8;
}

/// XPTI result codes (int32).
pub mod result {
    pub const SUCCESS: i32 = 0;
    pub const FALSE: i32 = 1;
    pub const FAIL: i32 = 0x8000_4001_u32 as i32;
    pub const NOTIMPL: i32 = 0x8000_4002_u32 as i32;
    pub const DUPLICATE: i32 = 0x8000_4003_u32 as i32;
    pub const NOTFOUND: i32 = 0x8000_4004_u32 as i32;
    pub const UNDELETE: i32 = 0x8000_4005_u32 as i32;
    pub const INVALIDARG: i32 = 0x8000_4006_u32 as i32;
}

/// Payload availability flags (`payload_t::flags`).
pub mod payload_flags {
    pub const NAME: u64 = 1;
    pub const SOURCE_FILE: u64 = 2;
    pub const CODE_POINTER: u64 = 4;
    pub const LINE: u64 = 8;
    pub const COLUMN: u64 = 16;
    pub const STACK_TRACE: u64 = 32;
    pub const REGISTERED: u64 = 1 << 15;
    pub const HASH_AVAILABLE: u64 = 1 << 17;
}

/// Event availability flags (`trace_event_data_t::flags`).
pub mod event_flags {
    pub const UID: u64 = 1;
    pub const SOURCE: u64 = 2;
    pub const TARGET: u64 = 4;
    pub const EVENT_TYPE: u64 = 8;
    pub const ACTIVITY_TYPE: u64 = 16;
    pub const PAYLOAD: u64 = 32;
}

/// Metadata object types (`object_data_t::type`).
pub mod object_type {
    pub const UNKNOWN: u8 = 0;
    pub const BOOLEAN: u8 = 1;
    pub const SIGNED_INTEGER: u8 = 2;
    pub const UNSIGNED_INTEGER: u8 = 3;
    pub const FLOATING: u8 = 4;
    pub const STRING: u8 = 5;
}

/// `XPTI_TRACE_POINT_BEGIN(v)`: the begin code of user value `v`.
pub const fn trace_point_begin(v: u8) -> u8 {
    v << 1
}
/// `XPTI_TRACE_POINT_END(v)`: the end code of user value `v`.
pub const fn trace_point_end(v: u8) -> u8 {
    (v << 1) | 1
}
/// `XPTI_TOOL_ID(code)`: the vendor id held in bits 8..15 (0 = predefined).
pub const fn tool_id(code: u16) -> u8 {
    (code >> 8) as u8
}
/// `XPTI_EXTRACT_USER_DEFINED_ID(code)`: the vendor's own value (bits 0..6).
pub const fn extract_user_defined_id(code: u16) -> u8 {
    (code & 0x7f) as u8
}
/// Whether a code is a user-defined (vendor) type.
pub const fn is_user_defined(code: u16) -> bool {
    code & 0x80 != 0 && tool_id(code) != 0
}
