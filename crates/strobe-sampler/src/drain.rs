//! The consumer side of the sample rings: decoding what the handler wrote
//! and handing it to a [`SampleSink`].
//!
//! The producer (the handler) knows nothing of where samples go; whoever
//! drains a ring (the collector, or a test) decides. Never runs in a
//! signal handler.

use crate::timer::TimerClock;
use strobe_core::shm::ring::{Corrupt, ShmRing};
use strobe_core::shm::wire::decode_sample;

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
    /// counter the process counts
    /// ([`strobe_core::shm::wire::COUNTER_MISSING`] when unknown); empty
    /// when it counts none.
    pub counters: &'a [u64],
}

/// Receives drained samples.
pub trait SampleSink {
    /// One sample; the frames are only valid during the call.
    fn deliver(&mut self, sample: &Sample<'_>);
}

/// Reads one sample record (a payload of a sample ring, or a copy of one).
pub fn sample_from(payload: &[u8]) -> Option<Sample<'_>> {
    let s = decode_sample(payload)?;
    Some(Sample {
        tid: s.head.tid,
        timestamp_ns: s.head.timestamp_ns,
        cpu_time_ns: s.head.cpu_time_ns,
        peak_rss_kb: s.head.peak_rss_kb,
        clock: if s.head.clock == 1 {
            TimerClock::Realtime
        } else {
            TimerClock::ThreadCpu
        },
        complete: s.head.complete != 0,
        overruns: s.head.overruns,
        frames: s.frames,
        counters: s.counters,
    })
}

/// Moves every sample out of `ring` into `sink`; malformed records are
/// skipped. Returns the number of samples delivered.
pub fn drain_samples(ring: &ShmRing, sink: &mut dyn SampleSink) -> Result<usize, Corrupt> {
    let mut delivered = 0;
    ring.drain(|payload| {
        if let Some(sample) = sample_from(payload) {
            sink.deliver(&sample);
            delivered += 1;
        }
    })?;
    Ok(delivered)
}
