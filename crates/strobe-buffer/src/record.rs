//! Record headers and the typed payloads every strobe producer emits.
//!
//! Owns the `#[repr(C)]` layouts shared with C tools (`include/strobe_tool.h`
//! mirrors each one field by field; the tests check sizes). Payloads are
//! plain old data with no implicit padding, so they can be copied byte for
//! byte into a buffer and read back through a pointer from C. Variable-length
//! records (samples, markers with text) are a fixed head followed by a
//! counted tail. This module must never allocate or lock: producers call it
//! on their hot path.

use crate::kind::{Category, Kind};
use std::ffi::c_void;

/// The most frame addresses a [`SampleRecord`] carries.
pub const MAX_SAMPLE_FRAMES: usize = 8000;
/// The most text bytes a [`MarkerRecord`] carries.
pub const MAX_MARKER_TEXT: usize = 1024;
/// The largest record payload a buffer accepts, in bytes (a header stores
/// sizes in 16 bits). A buffer also refuses records larger than its size.
pub const MAX_RECORD_SIZE: usize = u16::MAX as usize;

/// What a buffer callback receives for each record: seed 001's
/// `record_header_t` (category, kind, operation) plus the payload.
///
/// The payload points into the buffer's memory and is valid only during the
/// callback; it is 8-byte aligned. Layout (C `strobe_record_header_t`):
/// `uint32 category, kind, operation, size; const void *payload` — 24 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RecordHeader {
    /// A [`Category`] value.
    pub category: u32,
    /// A [`Kind`] value.
    pub kind: u32,
    /// The operation within the kind (an index into [`Kind::operations`]).
    pub operation: u32,
    /// Payload size in bytes, as emitted (head plus tail).
    pub size: u32,
    /// The payload bytes.
    pub payload: *const c_void,
}

impl RecordHeader {
    /// The record's kind, if the value is a known one.
    pub fn kind(&self) -> Option<Kind> {
        Kind::from_u32(self.kind)
    }

    /// The record's category, if the value is a known one.
    pub fn category(&self) -> Option<Category> {
        Category::from_u32(self.category)
    }

    /// The payload bytes. Valid only during the callback that received this
    /// header.
    pub fn payload_bytes(&self) -> &[u8] {
        if self.payload.is_null() || self.size == 0 {
            return &[];
        }
        // SAFETY: the delivery thread builds headers whose payload points at
        // `size` initialised bytes of a block that stays alive and unchanged
        // until the callback returns; the returned slice borrows `self`,
        // which the callback only sees for the callback's duration.
        unsafe { std::slice::from_raw_parts(self.payload as *const u8, self.size as usize) }
    }

    /// The payload as the fixed part of `T`, when the record's kind is
    /// `T::KIND` and it is large enough; `None` otherwise.
    pub fn payload_as<T: Payload>(&self) -> Option<&T> {
        if self.kind != T::KIND as u32 || (self.size as usize) < std::mem::size_of::<T>() {
            return None;
        }
        if !(self.payload as usize).is_multiple_of(std::mem::align_of::<T>()) {
            return None;
        }
        // SAFETY: kind and size were checked; payloads are 8-byte aligned
        // (checked above) and `T: Payload` promises a plain-old-data type
        // valid for any bit pattern the producer wrote with that kind.
        Some(unsafe { &*(self.payload as *const T) })
    }

    /// The frame addresses following a [`SampleRecord`], or an empty slice
    /// for other kinds.
    pub fn sample_frames(&self) -> &[u64] {
        let Some(head) = self.payload_as::<SampleRecord>() else {
            return &[];
        };
        let head_size = std::mem::size_of::<SampleRecord>();
        let available = (self.size as usize - head_size) / 8;
        let n = (head.frame_count as usize).min(available);
        // SAFETY: the tail of `n` u64 values lies inside the payload (checked
        // against `size`), starts 8-byte aligned (the head is 24 bytes from
        // an 8-aligned payload) and lives as long as the payload.
        unsafe {
            std::slice::from_raw_parts((self.payload as *const u8).add(head_size) as *const u64, n)
        }
    }

    /// The text following a [`MarkerRecord`] (empty for other kinds).
    pub fn marker_text(&self) -> &[u8] {
        let Some(head) = self.payload_as::<MarkerRecord>() else {
            return &[];
        };
        let head_size = std::mem::size_of::<MarkerRecord>();
        let bytes = self.payload_bytes();
        let end = (head_size + head.text_len as usize).min(bytes.len());
        &bytes[head_size..end]
    }
}

/// A fixed-size record payload type that may be copied byte for byte into a
/// buffer.
///
/// # Safety
/// Implementors must be `#[repr(C)]`, contain no implicit padding, no
/// pointers the consumer would dereference, and be valid for every bit
/// pattern; their alignment must be at most 8.
pub unsafe trait Payload: Copy + 'static {
    /// The kind records of this type are emitted as.
    const KIND: Kind;

    /// The record as bytes.
    fn as_bytes(&self) -> &[u8] {
        // SAFETY: `Payload` types have no padding (trait contract), so all
        // `size_of::<Self>()` bytes are initialised.
        unsafe {
            std::slice::from_raw_parts(
                self as *const Self as *const u8,
                std::mem::size_of::<Self>(),
            )
        }
    }
}

/// A region: a named span of time on one thread (user API push/pop,
/// instrumented functions, library regions).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RegionRecord {
    /// Start, `CLOCK_MONOTONIC` nanoseconds.
    pub start_ns: u64,
    /// End, `CLOCK_MONOTONIC` nanoseconds.
    pub end_ns: u64,
    /// Kernel thread id.
    pub tid: u32,
    /// Nesting depth on the thread (0 = outermost).
    pub depth: u32,
    /// The region's name as an id in the producer's string table.
    pub name_id: u64,
    /// Correlates this region with other records (0 = none).
    pub correlation_id: u64,
}

/// The fixed head of a sample: followed in the payload by `frame_count`
/// 64-bit frame addresses, innermost first (at most
/// [`MAX_SAMPLE_FRAMES`]).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SampleRecord {
    /// When the sample was taken, `CLOCK_MONOTONIC` nanoseconds.
    pub timestamp_ns: u64,
    /// Kernel thread id of the sampled thread.
    pub tid: u32,
    /// CPU the thread ran on, or `u32::MAX` when unknown.
    pub cpu: u32,
    /// How many frame addresses follow.
    pub frame_count: u32,
    /// Bit 0: the stack was truncated at [`MAX_SAMPLE_FRAMES`]; bit 1: the
    /// unwinder stopped early.
    pub flags: u32,
    /// The thread's CPU time when sampled, nanoseconds (0 = unknown).
    pub cpu_time_ns: u64,
    /// The process's peak resident set size, KiB (0 = unknown).
    pub peak_rss_kb: u64,
}

/// A wrapped library call: enter and exit with duration.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LibraryCallRecord {
    /// Enter time, `CLOCK_MONOTONIC` nanoseconds.
    pub enter_ns: u64,
    /// Exit time, `CLOCK_MONOTONIC` nanoseconds.
    pub exit_ns: u64,
    /// `exit_ns - enter_ns`.
    pub duration_ns: u64,
    /// Kernel thread id of the caller.
    pub tid: u32,
    /// Reserved, zero.
    pub reserved: u32,
    /// The call's return value, widened.
    pub return_value: i64,
    /// Correlates this call with other records (0 = none).
    pub correlation_id: u64,
}

/// A memory operation (allocation, free, mapping).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryRecord {
    /// `CLOCK_MONOTONIC` nanoseconds.
    pub timestamp_ns: u64,
    /// The address returned (allocations) or released (frees).
    pub address: u64,
    /// Bytes requested (0 for frees).
    pub size: u64,
    /// For `realloc`, the previous address; 0 otherwise.
    pub old_address: u64,
    /// Kernel thread id.
    pub tid: u32,
    /// Reserved, zero.
    pub reserved: u32,
}

/// How a [`CounterRecord`] value relates to earlier ones.
pub mod counter_value_type {
    /// The value is an absolute reading.
    pub const ABSOLUTE: u32 = 0;
    /// The value accumulates since the counter started.
    pub const ACCUMULATED: u32 = 1;
    /// The value is the change since the previous record.
    pub const RELATIVE: u32 = 2;
}

/// A counter value (32 bytes: the size the benchmarks use).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CounterRecord {
    /// `CLOCK_MONOTONIC` nanoseconds.
    pub timestamp_ns: u64,
    /// The counter's id in the producer's counter catalogue.
    pub counter_id: u64,
    /// The value.
    pub value: f64,
    /// Kernel thread id (0 = process-wide).
    pub tid: u32,
    /// One of [`counter_value_type`].
    pub value_type: u32,
}

/// The fixed head of a marker: followed in the payload by `text_len` bytes
/// of UTF-8 text (at most [`MAX_MARKER_TEXT`], not NUL-terminated).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MarkerRecord {
    /// `CLOCK_MONOTONIC` nanoseconds.
    pub timestamp_ns: u64,
    /// A user value (progress count, latency id, …).
    pub value: u64,
    /// The marker's name as an id in the producer's string table.
    pub name_id: u64,
    /// Kernel thread id.
    pub tid: u32,
    /// How many text bytes follow.
    pub text_len: u32,
}

/// An XPTI trace-point notification.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XptiRecord {
    /// `CLOCK_MONOTONIC` nanoseconds.
    pub timestamp_ns: u64,
    /// The event's 64-bit unique id.
    pub unique_id: u64,
    /// The parent event's unique id (0 = none).
    pub parent_unique_id: u64,
    /// The instance number of this visit.
    pub instance: u64,
    /// The notification's user data, as an integer.
    pub user_data: u64,
    /// Kernel thread id.
    pub tid: u32,
    /// The XPTI trace-point type.
    pub trace_type: u16,
    /// The XPTI stream id.
    pub stream_id: u8,
    /// Reserved, zero.
    pub reserved: u8,
}

// SAFETY: (all impls below) each type is #[repr(C)], made of u64/i64/f64/
// u32/u16/u8 fields laid out without implicit padding (sizes checked in
// tests), valid for any bit pattern, alignment 8.
unsafe impl Payload for RegionRecord {
    const KIND: Kind = Kind::Region;
}
// SAFETY: see above.
unsafe impl Payload for SampleRecord {
    const KIND: Kind = Kind::Sample;
}
// SAFETY: see above.
unsafe impl Payload for LibraryCallRecord {
    const KIND: Kind = Kind::LibraryCall;
}
// SAFETY: see above.
unsafe impl Payload for MemoryRecord {
    const KIND: Kind = Kind::Memory;
}
// SAFETY: see above.
unsafe impl Payload for CounterRecord {
    const KIND: Kind = Kind::Counter;
}
// SAFETY: see above.
unsafe impl Payload for MarkerRecord {
    const KIND: Kind = Kind::Marker;
}
// SAFETY: see above.
unsafe impl Payload for XptiRecord {
    const KIND: Kind = Kind::Xpti;
}

/// Views a slice of frame addresses as bytes (the tail of a sample).
pub(crate) fn frames_as_bytes(frames: &[u64]) -> &[u8] {
    // SAFETY: u64 has no padding; the byte view covers exactly the slice.
    unsafe {
        std::slice::from_raw_parts(frames.as_ptr() as *const u8, std::mem::size_of_val(frames))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::size_of;

    #[test]
    fn layouts_match_the_c_header() {
        assert_eq!(size_of::<RecordHeader>(), 24);
        assert_eq!(size_of::<RegionRecord>(), 40);
        assert_eq!(size_of::<SampleRecord>(), 40);
        assert_eq!(size_of::<LibraryCallRecord>(), 48);
        assert_eq!(size_of::<MemoryRecord>(), 40);
        assert_eq!(size_of::<CounterRecord>(), 32);
        assert_eq!(size_of::<MarkerRecord>(), 32);
        assert_eq!(size_of::<XptiRecord>(), 48);
    }
}
