//! The sample record: what the sampler's signal handler writes into a
//! thread's sample ring, and the one decoded [`Sample`] every reader of
//! samples uses (the collector's writer, the runtime's tool plugins, the
//! collector's kernel-assisted sampling, tests).
//!
//! Owns the record's layout ([`SampleHead`], then frames, then counter
//! values), the clock codes ([`TimerClock`]), the most counter values one
//! record carries ([`MAX_SAMPLE_COUNTERS`]) and decoding. The layout is
//! written in a signal handler: nothing here may ever make writing a
//! sample allocate, lock or format. Decoding never trusts a length it has
//! not checked and never reads outside the payload.

/// Fixed part of a sample record (40 bytes), followed by `depth` frames
/// (`u64` instruction pointer, then return addresses, innermost first),
/// then `counters` counter values (`u64` each, see [`COUNTER_MISSING`](crate::record::COUNTER_MISSING)).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SampleHead {
    /// `CLOCK_MONOTONIC` nanoseconds when the signal was handled.
    pub timestamp_ns: u64,
    /// The thread's CPU time then.
    pub cpu_time_ns: u64,
    /// The process's peak resident set size so far, in KiB.
    pub peak_rss_kb: u64,
    /// Kernel thread id.
    pub tid: i32,
    /// Frames that follow.
    pub depth: u16,
    /// 0 = CPU-time timer, 1 = real-time timer.
    pub clock: u8,
    /// 1 when the unwind reached the outermost frame.
    pub complete: u8,
    /// Timer expirations merged into this one.
    pub overruns: u32,
    /// Counter values after the frames: one per counter the process
    /// counts (`sampling_events`, in the launcher's order), each the
    /// change since the thread's previous sample (scaled when the kernel
    /// multiplexed the counter), or [`COUNTER_MISSING`](crate::record::COUNTER_MISSING). 0 when the
    /// process counts nothing.
    pub counters: u16,
    pub reserved: u16,
}

/// Bytes of [`SampleHead`].
pub const SAMPLE_HEAD_BYTES: usize = std::mem::size_of::<SampleHead>();
const _: () = assert!(SAMPLE_HEAD_BYTES == 40);

/// Most counter values one sample carries (the runtime reads at most this
/// many counters per thread; the launcher refuses more).
pub const MAX_SAMPLE_COUNTERS: usize = 256;

/// Which clock drives a timer (a sample record's `clock`: 0 and 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimerClock {
    /// The target thread's CPU time: samples where CPU time goes. The kernel
    /// delivers these at most once per scheduler tick (250 Hz here).
    ThreadCpu,
    /// Elapsed time (`CLOCK_MONOTONIC`): also samples threads that wait.
    Realtime,
}

impl TimerClock {
    /// Both clocks.
    pub const ALL: [TimerClock; 2] = [TimerClock::ThreadCpu, TimerClock::Realtime];

    /// The name stored with samples.
    pub const fn name(self) -> &'static str {
        match self {
            TimerClock::ThreadCpu => "cputime",
            TimerClock::Realtime => "realtime",
        }
    }
}

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
    /// Counter changes since the thread's previous sample, one per
    /// counter the process counts ([`COUNTER_MISSING`](crate::record::COUNTER_MISSING) when unknown);
    /// empty when it counts none.
    pub counters: &'a [u64],
}

/// Reads one sample record (a payload of a sample ring, or a copy of one);
/// `None` when malformed.
pub fn decode_sample(payload: &[u8]) -> Option<Sample<'_>> {
    if payload.len() < SAMPLE_HEAD_BYTES {
        return None;
    }
    // SAFETY: at least one head's bytes; read_unaligned copes with alignment.
    let head: SampleHead =
        unsafe { std::ptr::read_unaligned(payload.as_ptr() as *const SampleHead) };
    let rest = &payload[SAMPLE_HEAD_BYTES..];
    let depth = head.depth as usize;
    let counters = head.counters as usize;
    if rest.len() < (depth + counters) * 8 || !(rest.as_ptr() as usize).is_multiple_of(8) {
        return None;
    }
    // SAFETY: `depth + counters` aligned u64s fit in the payload (checked).
    let all = unsafe { std::slice::from_raw_parts(rest.as_ptr() as *const u64, depth + counters) };
    let (frames, counters) = all.split_at(depth);
    Some(Sample {
        tid: head.tid,
        timestamp_ns: head.timestamp_ns,
        cpu_time_ns: head.cpu_time_ns,
        peak_rss_kb: head.peak_rss_kb,
        clock: if head.clock == 1 {
            TimerClock::Realtime
        } else {
            TimerClock::ThreadCpu
        },
        complete: head.complete != 0,
        overruns: head.overruns,
        frames,
        counters,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{as_bytes, COUNTER_MISSING};
    use std::mem::offset_of;

    #[test]
    fn the_head_layout_is_the_contract() {
        assert_eq!(SAMPLE_HEAD_BYTES, 40);
        assert_eq!(offset_of!(SampleHead, timestamp_ns), 0);
        assert_eq!(offset_of!(SampleHead, cpu_time_ns), 8);
        assert_eq!(offset_of!(SampleHead, peak_rss_kb), 16);
        assert_eq!(offset_of!(SampleHead, tid), 24);
        assert_eq!(offset_of!(SampleHead, depth), 28);
        assert_eq!(offset_of!(SampleHead, clock), 30);
        assert_eq!(offset_of!(SampleHead, complete), 31);
        assert_eq!(offset_of!(SampleHead, overruns), 32);
        assert_eq!(offset_of!(SampleHead, counters), 36);
        assert_eq!(offset_of!(SampleHead, reserved), 38);
    }

    #[test]
    fn samples_round_trip_and_short_ones_are_refused() {
        let head = SampleHead {
            timestamp_ns: 5,
            cpu_time_ns: 6,
            peak_rss_kb: 7,
            tid: 9,
            depth: 2,
            clock: 1,
            complete: 1,
            overruns: 3,
            ..Default::default()
        };
        let mut buf = vec![0u64; 7];
        // SAFETY: 56 bytes of the u64 buffer.
        let bytes = unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr() as *mut u8, 56) };
        bytes[..40].copy_from_slice(as_bytes(&head));
        bytes[40..48].copy_from_slice(&0x1000u64.to_ne_bytes());
        bytes[48..56].copy_from_slice(&0x2000u64.to_ne_bytes());
        let s = decode_sample(bytes).unwrap();
        assert_eq!(
            (s.tid, s.timestamp_ns, s.cpu_time_ns, s.peak_rss_kb),
            (9, 5, 6, 7)
        );
        assert_eq!(
            (s.clock, s.complete, s.overruns),
            (TimerClock::Realtime, true, 3)
        );
        assert_eq!(s.frames, &[0x1000, 0x2000]);
        assert!(s.counters.is_empty());
        assert!(
            decode_sample(&bytes[..48]).is_none(),
            "depth says 2 frames, 1 present"
        );
        assert!(decode_sample(&bytes[..39]).is_none(), "shorter than a head");
    }

    #[test]
    fn any_clock_but_the_real_time_code_is_cpu_time() {
        for (code, clock) in [
            (0, TimerClock::ThreadCpu),
            (1, TimerClock::Realtime),
            (7, TimerClock::ThreadCpu),
        ] {
            let head = SampleHead {
                clock: code,
                ..Default::default()
            };
            let mut buf = [0u64; 5];
            // SAFETY: the 40 bytes of the u64 buffer.
            let bytes = unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr() as *mut u8, 40) };
            bytes.copy_from_slice(as_bytes(&head));
            assert_eq!(decode_sample(bytes).unwrap().clock, clock);
        }
    }

    #[test]
    fn samples_carry_counter_values_after_the_frames() {
        let head = SampleHead {
            depth: 1,
            counters: 2,
            ..Default::default()
        };
        let mut buf = vec![0u64; 8];
        // SAFETY: 64 bytes of the u64 buffer.
        let bytes = unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr() as *mut u8, 64) };
        bytes[..40].copy_from_slice(as_bytes(&head));
        bytes[40..48].copy_from_slice(&0x1000u64.to_ne_bytes());
        bytes[48..56].copy_from_slice(&7u64.to_ne_bytes());
        bytes[56..64].copy_from_slice(&COUNTER_MISSING.to_ne_bytes());
        let s = decode_sample(bytes).unwrap();
        assert_eq!(s.frames, &[0x1000]);
        assert_eq!(s.counters, &[7, COUNTER_MISSING]);
        assert!(decode_sample(&bytes[..56]).is_none());
    }

    #[test]
    fn a_misaligned_payload_is_refused() {
        let head = SampleHead {
            depth: 1,
            ..Default::default()
        };
        let mut buf = vec![0u64; 7];
        // SAFETY: 56 bytes of the u64 buffer.
        let bytes = unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr() as *mut u8, 56) };
        bytes[4..44].copy_from_slice(as_bytes(&head));
        assert!(decode_sample(&bytes[4..52]).is_none());
    }
}
