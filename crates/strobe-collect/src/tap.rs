//! Emptying one process's rings, on the collector thread.
//!
//! Owns the fast half of following a process: copying every record out of
//! its rings into a [`Batch`] (event rings before sample rings, so threads,
//! names and modules precede the samples that need them), freeing the
//! slots of ended threads once both their rings are empty, the
//! `sampling_on` flags (delays, durations, time windows), and what must be
//! seen at once: children announced to be waited for, threads blocking the
//! sampling signal. Never decodes records beyond their kind and never
//! touches a database: that is the writer's work ([`crate::process`]), so a
//! slow database never slows the program's producers down.

use crate::Options;
use std::collections::HashSet;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use strobe_core::clock::now_ns;
use strobe_core::shm::ring::ShmRing;
use strobe_core::shm::segment::{exec_reason, slot_state, Segment};
use strobe_core::shm::wire::{decode_event, event};
use strobe_core::timewindow::{ClockReader, WindowClock, WindowEvaluator};

/// Blocking the sampling signal for this long in total is reported.
const BLOCKED_REPORT_NS: u64 = 50_000_000;

/// Where a copied record came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// An event ring.
    Events,
    /// A sample ring.
    Samples,
}

/// Records copied out of one process's rings, in the order they must be
/// applied.
#[derive(Default)]
pub struct Batch {
    /// The records' bytes, back to back.
    pub bytes: Vec<u8>,
    /// (source, thread id of the slot, range in `bytes`).
    pub records: Vec<(Source, i32, std::ops::Range<usize>)>,
    /// Sample counters of slots freed in this batch: taken, lost (full),
    /// lost (nested), overruns, incomplete.
    pub retired: [u64; 5],
    /// Messages for the run summary.
    pub notes: Vec<String>,
    /// Rings that held a corrupt record (skipped).
    pub corrupt: Vec<String>,
}

impl Batch {
    /// Whether the batch carries nothing.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
            && self.notes.is_empty()
            && self.corrupt.is_empty()
            && self.retired == [0; 5]
    }

    /// Bytes held (for the collector's bound on queued data).
    pub fn weight(&self) -> usize {
        self.bytes.len() + self.records.len() * std::mem::size_of::<(Source, i32, usize, usize)>()
    }

    fn copy(&mut self, ring: &ShmRing, source: Source, tid: i32, mut seen: impl FnMut(&[u8])) {
        let drained = ring.drain(|payload| {
            let start = self.bytes.len();
            self.bytes.extend_from_slice(payload);
            self.records.push((source, tid, start..self.bytes.len()));
            seen(payload);
        });
        if drained.is_err() {
            self.corrupt.push(format!(
                "thread {tid}: a corrupt {} record was skipped",
                match source {
                    Source::Events => "event",
                    Source::Samples => "sample",
                }
            ));
        }
    }
}

/// CPU time of another process, for time windows on CPU clocks.
struct ProcessClocks(i32);

impl ClockReader for ProcessClocks {
    fn read_ns(&self, clock: WindowClock) -> u64 {
        match clock {
            WindowClock::Realtime => strobe_core::clock::now_ns(),
            _ => {
                // The kernel's process CPU clock of pid: ((~pid) << 3) | 2
                // (CPUCLOCK_SCHED).
                strobe_core::clock::read_clock_ns(((!self.0) << 3) | 2)
            }
        }
    }
}

/// One followed process image, as the collector thread sees it.
pub struct Tap {
    /// Names the image in messages to the writer.
    pub id: u64,
    pub pid: i32,
    pub segment: Arc<Segment>,
    pidfd: OwnedFd,
    /// The pidfd said the process ended.
    pub exited: bool,
    /// The command line, for messages.
    pub command: String,
    windows: WindowEvaluator,
    blocked_reported: HashSet<i32>,
}

impl Tap {
    /// Starts following an image whose segment arrived.
    pub fn new(id: u64, pid: i32, segment: Arc<Segment>, pidfd: OwnedFd, options: &Options) -> Tap {
        let command = crate::process::describe(&segment).command();
        Tap {
            id,
            pid,
            windows: WindowEvaluator::start(&options.windows, &ProcessClocks(pid)),
            segment,
            pidfd,
            exited: false,
            command,
            blocked_reported: HashSet::new(),
        }
    }

    /// The pidfd to poll for the process's end.
    pub fn pidfd(&self) -> i32 {
        self.pidfd.as_raw_fd()
    }

    /// Sets the samplers' on/off flags from delays, durations and windows.
    pub fn control(&mut self, options: &Options) {
        let elapsed = now_ns().saturating_sub(self.segment.header().start_ns);
        let windows_on = self.windows.is_on(&ProcessClocks(self.pid));
        for (i, timing) in options.timing.iter().enumerate() {
            let on = windows_on
                && elapsed >= timing.delay_ns
                && (timing.duration_ns == 0 || elapsed < timing.delay_ns + timing.duration_ns);
            self.segment.header().sampling_on[i].store(u32::from(on), Ordering::Relaxed);
        }
    }

    /// Copies everything out of the rings into `batch`; children announced
    /// to connect go to `children`. Slots of ended threads whose rings are
    /// empty are freed.
    pub fn drain(&mut self, batch: &mut Batch, children: &mut Vec<i32>) {
        let slots = self.segment.slots_in_use();
        for i in 0..slots {
            let slot = self.segment.slot(i);
            if slot.state.load(Ordering::Acquire) == slot_state::FREE {
                continue;
            }
            let tid = slot.tid.load(Ordering::Acquire);
            let since = slot.blocked_since.load(Ordering::Relaxed);
            let open = if since == 0 {
                0
            } else {
                now_ns().saturating_sub(since)
            };
            // Short blocks (around fork, in critical sections) lose a
            // sample at most: only long ones are reported.
            let blocked = slot.blocked_ns.load(Ordering::Relaxed) + open >= BLOCKED_REPORT_NS;
            batch.copy(
                &self.segment.event_ring(i),
                Source::Events,
                tid,
                |payload| {
                    if let Some(e) = decode_event(payload) {
                        if e.head.kind == event::CHILD
                            && e.head.arg == exec_reason::NONE
                            && e.bytes.len() >= 4
                        {
                            children.push(i32::from_le_bytes(
                                e.bytes[..4].try_into().unwrap_or_default(),
                            ));
                        }
                    }
                },
            );
            if blocked && self.blocked_reported.insert(tid) {
                batch.notes.push(format!(
                    "thread {tid} blocked the sampling signal: not sampled while it was blocked"
                ));
            }
        }
        for i in 0..slots {
            let slot = self.segment.slot(i);
            let state = slot.state.load(Ordering::Acquire);
            if state == slot_state::FREE {
                continue;
            }
            let tid = slot.tid.load(Ordering::Acquire);
            let ring = self.segment.sample_ring(i);
            batch.copy(&ring, Source::Samples, tid, |_| {});
            if state == slot_state::ENDED
                && ring.used() == 0
                && self.segment.event_ring(i).used() == 0
            {
                for (t, c) in batch
                    .retired
                    .iter_mut()
                    .zip(sample_counters(&self.segment, i))
                {
                    *t += c;
                }
                self.segment.free_slot(i);
            }
        }
    }
}

/// Sample counters of slot `i`: taken, lost (full), lost (nested),
/// overruns, incomplete.
pub fn sample_counters(segment: &Segment, i: u32) -> [u64; 5] {
    let slot = segment.slot(i);
    [
        &slot.taken,
        &slot.lost_full,
        &slot.lost_reentrant,
        &slot.overruns,
        &slot.incomplete,
    ]
    .map(|c| c.load(Ordering::Relaxed))
}
