//! The sample record: what the signal handler writes into a thread's ring
//! and what the allocator thread hands to the [`SampleSink`].
//!
//! Owns the byte layout (a fixed header followed by the frames) and its
//! decoding. Writing the layout happens in the handler; decoding never does.

use crate::timer::TimerClock;

/// Fixed part of a sample record in the ring (40 bytes, 8-aligned).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RecordHeader {
    pub timestamp_ns: u64,
    pub cpu_time_ns: u64,
    pub peak_rss_kb: u64,
    pub tid: i32,
    pub depth: u16,
    pub clock: u8,
    pub complete: u8,
    pub overruns: u32,
    pub reserved: u32,
}

pub(crate) const HEADER_BYTES: usize = std::mem::size_of::<RecordHeader>();
const _: () = assert!(HEADER_BYTES == 40);

/// One call-stack sample of one thread.
#[derive(Debug, Clone, Copy)]
pub struct Sample<'a> {
    /// Kernel thread id.
    pub tid: i32,
    /// `CLOCK_MONOTONIC` nanoseconds when the signal was handled.
    pub timestamp_ns: u64,
    /// The thread's CPU time at that moment.
    pub cpu_time_ns: u64,
    /// The process's peak resident set size so far, in KiB.
    pub peak_rss_kb: u64,
    /// The timer that took the sample.
    pub clock: TimerClock,
    /// The unwind reached the outermost frame.
    pub complete: bool,
    /// Timer expirations merged into this one by the kernel (missed samples).
    pub overruns: u32,
    /// Instruction pointer first, then return addresses, innermost first.
    /// Symbolize return addresses at `address - 1` (the call instruction).
    pub frames: &'a [u64],
}

/// Receives samples from the allocator threads. Called from several
/// allocator threads at once; never from a signal handler.
pub trait SampleSink: Send + Sync {
    /// One sample; the frames are only valid during the call.
    fn deliver(&self, sample: &Sample<'_>);
}

/// Decodes a ring payload. Returns `None` for a malformed record.
pub(crate) fn decode(payload: &[u8]) -> Option<Sample<'_>> {
    if payload.len() < HEADER_BYTES {
        return None;
    }
    // SAFETY: the payload holds at least one header; read_unaligned copes
    // with any alignment.
    let header: RecordHeader =
        unsafe { std::ptr::read_unaligned(payload.as_ptr() as *const RecordHeader) };
    let depth = header.depth as usize;
    let frame_bytes = &payload[HEADER_BYTES..];
    if frame_bytes.len() < depth * 8 || !(frame_bytes.as_ptr() as usize).is_multiple_of(8) {
        return None;
    }
    // SAFETY: `depth` u64s fit in the payload and the pointer is 8-aligned.
    let frames = unsafe { std::slice::from_raw_parts(frame_bytes.as_ptr() as *const u64, depth) };
    Some(Sample {
        tid: header.tid,
        timestamp_ns: header.timestamp_ns,
        cpu_time_ns: header.cpu_time_ns,
        peak_rss_kb: header.peak_rss_kb,
        clock: if header.clock == 1 {
            TimerClock::Realtime
        } else {
            TimerClock::ThreadCpu
        },
        complete: header.complete != 0,
        overruns: header.overruns,
        frames,
    })
}
