//! Emptying one process's rings, on the collector thread.
//!
//! Owns the fast half of following a process: copying every record out of
//! its rings into a [`Batch`] (event rings before sample rings, so threads,
//! names and modules precede the samples that need them), freeing the
//! slots of ended threads once both their rings are empty, the
//! `sampling_on` flags (delays, durations, time windows), and what must be
//! seen at once: children announced to be waited for, static images the
//! process started or became, threads blocking the sampling signal or
//! without a slot (the task list in `/proc`, read every 200 ms), and turning the time-stamp counter ticks of hot-path
//! events into `CLOCK_MONOTONIC` ([`TscMap`]). Never decodes records
//! beyond their head and never touches a database: that is the writer's work ([`crate::process`]), so a
//! slow database never slows the program's producers down.

use crate::Options;
use std::collections::{BTreeMap, HashSet};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use strobe_core::clock::now_ns;
use strobe_core::timewindow::{ClockReader, WindowClock, WindowEvaluator};
use strobe_wire::record::{event, event_flags, read, EventHead, MpiCallBody, EVENT_HEAD_BYTES};
use strobe_wire::ring::ShmRing;
use strobe_wire::segment::{exec_reason, slot_state, state, Segment};

/// Blocking the sampling signal for this long in total is reported.
const BLOCKED_REPORT_NS: u64 = 50_000_000;

/// Where a copied record came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// An event ring.
    Events,
    /// A sample ring.
    Samples,
    /// A kernel sampling ring (a whole perf record).
    Kernel,
}

impl Source {
    /// A number for the source (in the spool file).
    pub fn code(self) -> u32 {
        self as u32
    }

    /// The source numbered `code`.
    pub fn from_code(code: u32) -> Option<Source> {
        [Source::Events, Source::Samples, Source::Kernel]
            .get(code as usize)
            .copied()
    }
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
    pub retired: [u64; 6],
    /// Messages for the run summary.
    pub notes: Vec<String>,
    /// Rings that held a corrupt record (the rest of what they held was
    /// skipped): the thread and the kind of ring.
    pub corrupt: Vec<(i32, Source)>,
    /// Process-level values read from `/proc` (`process_sampling_freq`).
    pub process_points: Vec<crate::procstat::Point>,
    /// Causal experiments that ended.
    pub causal: Vec<strobe_db::CausalExperiment>,
    /// In-scope samples per selectable unit (sent once, at the end).
    pub causal_samples: Vec<(String, u64)>,
    /// Where `bytes` and `records` wait on disk, when the collector spilled
    /// them ([`crate::spool`]); the writer restores them first.
    pub spilled: Option<crate::spool::Spilled>,
}

impl Batch {
    /// Whether the batch carries nothing.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
            && self.spilled.is_none()
            && self.process_points.is_empty()
            && self.causal.is_empty()
            && self.causal_samples.is_empty()
            && self.notes.is_empty()
            && self.corrupt.is_empty()
            && self.retired == [0; 6]
    }

    /// Bytes held (for the collector's bound on queued data).
    pub fn weight(&self) -> usize {
        self.bytes.len() + self.records.len() * std::mem::size_of::<(Source, i32, usize, usize)>()
    }

    /// Adds one record of a kernel sampling ring.
    pub fn push_kernel(&mut self, record: &[u8]) {
        self.bytes.resize(self.bytes.len().next_multiple_of(8), 0);
        let start = self.bytes.len();
        self.bytes.extend_from_slice(record);
        self.records
            .push((Source::Kernel, 0, start..self.bytes.len()));
    }

    /// Copies every record of `ring`; `each` may rewrite the copy. Each
    /// record starts 8-aligned in `bytes` (as in the ring), whatever the
    /// length of the one before: samples are read in place as `u64`
    /// frames (`decode_sample` refuses a misaligned one), and `bytes`
    /// comes from the allocator 16-aligned.
    fn copy(&mut self, ring: &ShmRing, source: Source, tid: i32, mut each: impl FnMut(&mut [u8])) {
        let drained = ring.drain(|payload| {
            self.bytes.resize(self.bytes.len().next_multiple_of(8), 0);
            let start = self.bytes.len();
            self.bytes.extend_from_slice(payload);
            each(&mut self.bytes[start..]);
            self.records.push((source, tid, start..self.bytes.len()));
        });
        if drained.is_err() {
            self.corrupt.push((tid, source));
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

/// Turns the time-stamp counter ticks of one ring's events into
/// `CLOCK_MONOTONIC` nanoseconds. The events copied now were written
/// between the ring's previous copy and now; the collector read the
/// counter and the clock together at both moments, and interpolates
/// linearly between those two readings: exact at both ends, never drifting
/// however long the run, and never going backwards within a thread.
#[derive(Debug, Clone, Copy)]
pub struct TscMap {
    from: (u64, u64),
    to: (u64, u64),
    /// Nanoseconds per tick in 32.32 fixed point (one division per map,
    /// not per event); `None` when the readings do not advance.
    ns_per_tick: Option<i128>,
}

impl TscMap {
    /// The map between two (ticks, ns) readings.
    pub fn between(from: (u64, u64), to: (u64, u64)) -> TscMap {
        let (t0, n0) = (from.0 as i128, from.1 as i128);
        let (t1, n1) = (to.0 as i128, to.1 as i128);
        // The first reading comes from the segment (the program's): any
        // values, so products saturate rather than overflow.
        // Rounded up, and the result capped at the end reading: exact at
        // both ends.
        let ns_per_tick = (t1 > t0).then(|| {
            ((n1 - n0)
                .saturating_mul(1 << 32)
                .saturating_add(t1 - t0 - 1))
                / (t1 - t0)
        });
        TscMap {
            from,
            to,
            ns_per_tick,
        }
    }

    /// Nanoseconds of `ticks`.
    pub fn ns(&self, ticks: u64) -> u64 {
        let Some(ratio) = self.ns_per_tick else {
            return self.to.1;
        };
        let elapsed = (ticks as i128 - self.from.0 as i128).saturating_mul(ratio) >> 32;
        let ns = (self.from.1 as i128).saturating_add(elapsed);
        let ns = ns.clamp(0, u64::MAX as i128) as u64;
        if ticks <= self.to.0 {
            ns.min(self.to.1)
        } else {
            ns
        }
    }
}

/// Reads a copied event's head and rewrites a tick timestamp as
/// nanoseconds, no earlier than `last` (the thread's previous converted
/// event, updated). `None` for a record too short to hold a head.
fn to_monotonic(record: &mut [u8], map: &TscMap, last: &mut u64) -> Option<EventHead> {
    let mut head = read::<EventHead>(record)?;
    if head.flags & event_flags::TSC != 0 {
        head.flags &= !event_flags::TSC;
        head.timestamp_ns = map.ns(head.timestamp_ns).max(*last);
        *last = head.timestamp_ns;
        record[..EVENT_HEAD_BYTES].copy_from_slice(head.as_bytes());
        if head.kind == event::MPI_CALL {
            MpiCallBody::begin_to_ns(&mut record[EVENT_HEAD_BYTES..], head.timestamp_ns, |t| {
                map.ns(t)
            });
        }
    }
    Some(head)
}

/// What one copy of an image's rings found out.
#[derive(Default)]
pub struct Found {
    /// Children announced, to be waited for until they connect.
    pub children: Vec<i32>,
    /// Processes that run (or are about to run) an image the runtime
    /// cannot start in (static, setuid, or an environment without
    /// strobe's variables).
    pub without_runtime: Vec<WithoutRuntime>,
    /// Threads found blocking the sampling signal.
    pub blocking: Vec<i32>,
    /// Threads the sampler has no slot for (see [`Tap::threads_without_slot`]).
    pub unslotted: Vec<i32>,
}

/// A process that runs an image without strobe's runtime.
pub struct WithoutRuntime {
    pub pid: i32,
    /// Why (`exec_reason`).
    pub reason: u32,
    /// The image it runs, as the runtime resolved it before `exec`.
    pub image: Vec<u8>,
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
    /// The process exec'd a static image and it was reported.
    /// Threads handed to the kernel, by why and what became of them: said
    /// once, when the image ends.
    pub threads_noted: BTreeMap<(&'static str, String), Vec<i32>>,
    /// The process replaced this image by one without the runtime (and
    /// the collector was told).
    exec_without_runtime: bool,
    /// Threads found without a slot at the last scan of the task list,
    /// and when that scan was.
    unslotted: HashSet<i32>,
    last_task_scan_ns: u64,
    /// Per slot: the (ticks, ns) reading at its event ring's last copy,
    /// and the time of its last converted event.
    event_clock: Vec<((u64, u64), u64)>,
    /// Reads the process's `/proc` values (`process_sampling_freq`).
    process: Option<crate::procstat::ProcessSampler>,
    /// Causal experiments, once the runtime said it takes part.
    causal: Option<crate::causal::Controller>,
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
            threads_noted: BTreeMap::new(),
            exec_without_runtime: false,
            unslotted: HashSet::new(),
            last_task_scan_ns: now_ns(),
            event_clock: Vec::new(),
            process: crate::procstat::ProcessSampler::new(pid, options.process_sampling_hz),
            causal: None,
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
        // The runtime says it takes part once its sampler runs (after the
        // segment was handed over).
        if let Some(causal) = &options.causal {
            if self.causal.is_none() && self.segment.causal().enabled.load(Ordering::Acquire) == 1 {
                self.causal = Some(crate::causal::Controller::start(
                    self.pid,
                    self.segment.clone(),
                    causal,
                ));
            }
        }
    }

    /// Whether the image takes part in causal profiling.
    pub fn causal_active(&self) -> bool {
        self.causal.is_some()
    }

    /// The image ended: its causal experiment in progress ends and the
    /// sample counts go out, into `batch`.
    pub fn finish(&mut self, batch: &mut Batch) {
        if let Some(c) = self.causal.as_mut() {
            c.finish(batch);
        }
    }

    /// Copies everything out of the rings into `batch`; what the records
    /// said goes to `found`. Slots of ended threads whose rings are empty
    /// are freed.
    pub fn drain(&mut self, batch: &mut Batch, found: &mut Found) {
        if let Some(c) = self.causal.as_mut() {
            c.step(now_ns(), batch);
        }
        if let Some(point) = self.process.as_mut().and_then(|p| p.due()) {
            batch.process_points.push(point);
        }
        if !self.exec_without_runtime {
            if let Some(image) = self.runs_image_without_runtime() {
                self.exec_without_runtime = true;
                found.without_runtime.push(image);
            }
        }
        let slots = self.segment.slots_in_use();
        let [ticks, ns] = self.segment.header().tsc_anchor;
        let anchor = (ticks, ns);
        self.event_clock.resize(slots as usize, (anchor, 0));
        let now = strobe_core::clock::tsc_pair();
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
            let blocked =
                slot.blocked_ns.load(Ordering::Relaxed).saturating_add(open) >= BLOCKED_REPORT_NS;
            let (copied, last) = &mut self.event_clock[i as usize];
            let map = TscMap::between(*copied, now);
            batch.copy(&self.segment.event_ring(i), Source::Events, tid, |record| {
                let Some(head) = to_monotonic(record, &map, last) else {
                    return;
                };
                let bytes = &record[EVENT_HEAD_BYTES..];
                if head.kind == event::CHILD && bytes.len() >= 4 {
                    let pid = i32::from_le_bytes(bytes[..4].try_into().unwrap_or_default());
                    match head.arg {
                        exec_reason::NONE => found.children.push(pid),
                        reason => found.without_runtime.push(WithoutRuntime {
                            pid,
                            reason,
                            image: bytes[4..].to_vec(),
                        }),
                    }
                }
            });
            *copied = now;
            if blocked && self.blocked_reported.insert(tid) {
                found.blocking.push(tid);
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
                    *t = t.saturating_add(c);
                }
                self.segment.free_slot(i);
            }
        }
    }
}

impl Tap {
    /// Whether the process replaced its image by a static one, found by
    /// an earlier copy.
    pub fn replaced_by_image_without_runtime(&self) -> bool {
        self.exec_without_runtime
    }

    /// The image without the runtime the process replaced this one by:
    /// the runtime said before `exec` that the new image would not have
    /// it, and the process no longer maps the runtime (so the exec
    /// happened).
    fn runs_image_without_runtime(&self) -> Option<WithoutRuntime> {
        let h = self.segment.header();
        let reason = h.exec_reason.load(Ordering::Acquire);
        if h.state.load(Ordering::Acquire) != state::EXEC || reason == exec_reason::NONE {
            return None;
        }
        // Unreadable: the process ended (it is counted as such).
        let maps = std::fs::read(format!("/proc/{}/maps", self.pid)).unwrap_or_default();
        if maps.windows(14).any(|w| w == b"strobe_runtime") {
            return None;
        }
        Some(WithoutRuntime {
            pid: self.pid,
            reason,
            image: self.segment.exec_note().0,
        })
    }

    /// Threads of the process that the in-program sampler has no slot for
    /// (made by a raw `clone`, or started when every slot was taken),
    /// found by reading the task list at most every [`TASK_SCAN_NS`]: a
    /// thread is reported once, when two scans in a row found it without
    /// a slot (a `pthread_create`d thread takes its slot as it starts).
    pub fn threads_without_slot(&mut self, out: &mut Vec<i32>) {
        let now = now_ns();
        if now.saturating_sub(self.last_task_scan_ns) < TASK_SCAN_NS {
            return;
        }
        self.last_task_scan_ns = now;
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", self.pid)) else {
            return;
        };
        let slotted: HashSet<i32> = (0..self.segment.slots_in_use())
            .map(|i| self.segment.slot(i))
            .filter(|slot| slot.state.load(Ordering::Acquire) != slot_state::FREE)
            .map(|slot| slot.tid.load(Ordering::Acquire))
            .collect();
        let before = std::mem::take(&mut self.unslotted);
        for tid in tasks.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok()) {
            if slotted.contains(&tid) || self.blocked_reported.contains(&tid) {
                continue;
            }
            if before.contains(&tid) {
                self.blocked_reported.insert(tid);
                out.push(tid);
            } else {
                self.unslotted.insert(tid);
            }
        }
    }
}

/// How often a process's task list is read for threads without a slot.
const TASK_SCAN_NS: u64 = 200_000_000;

/// Sample counters of slot `i`: taken, lost (full), lost (nested),
/// overruns, incomplete, lost (small alternate stack).
pub fn sample_counters(segment: &Segment, i: u32) -> [u64; 6] {
    let slot = segment.slot(i);
    [
        &slot.taken,
        &slot.lost_full,
        &slot.lost_reentrant,
        &slot.overruns,
        &slot.incomplete,
        &slot.lost_altstack,
    ]
    .map(|c| c.load(Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_copied_after_an_odd_length_event_still_decodes() {
        let layout = strobe_wire::segment::Layout {
            slots: 1,
            sample_ring_bytes: 4096,
            event_ring_bytes: 4096,
        };
        let (segment, _fd) = Segment::create(layout, 1, 1, 0, (0, 0)).unwrap();
        let slot = segment.claim_slot(7).unwrap();
        assert!(segment.event_ring(slot).push(&[&[1u8; 13]]));
        let head = strobe_wire::sample::SampleHead {
            timestamp_ns: 5,
            cpu_time_ns: 6,
            peak_rss_kb: 0,
            tid: 7,
            depth: 2,
            clock: 0,
            complete: 1,
            overruns: 0,
            counters: 0,
            reserved: 0,
        };
        // SAFETY: SampleHead is plain old data of SAMPLE_HEAD_BYTES bytes.
        let head_bytes: [u8; 40] = unsafe { std::mem::transmute(head) };
        let frames: Vec<u8> = [0x1000u64, 0x2000]
            .iter()
            .flat_map(|f| f.to_le_bytes())
            .collect();
        assert!(segment.sample_ring(slot).push(&[&head_bytes, &frames]));
        let mut batch = Batch::default();
        batch.copy(&segment.event_ring(slot), Source::Events, 7, |_| {});
        batch.copy(&segment.sample_ring(slot), Source::Samples, 7, |_| {});
        let (_, _, range) = batch.records[1].clone();
        let sample = strobe_wire::sample::decode_sample(&batch.bytes[range]).unwrap();
        assert_eq!(sample.frames, [0x1000, 0x2000]);
    }

    #[test]
    fn ticks_map_exactly_onto_both_readings_and_linearly_between() {
        let map = TscMap::between((1_000, 5_000), (3_000, 6_000));
        assert_eq!(map.ns(1_000), 5_000);
        assert_eq!(map.ns(3_000), 6_000);
        assert_eq!(map.ns(2_000), 5_500);
        // Written a little after the second reading (during the copy).
        assert_eq!(map.ns(3_200), 6_100);
        // Ratios that fixed point cannot hold exactly still land on both
        // readings: 1 ns in 3 ticks, and a second of a 3 GHz counter.
        let map = TscMap::between((0, 0), (3, 1));
        assert_eq!((map.ns(0), map.ns(3)), (0, 1));
        let (t0, n0) = (1u64 << 40, 5_000_000_000_000u64);
        let map = TscMap::between((t0, n0), (t0 + 2_999_999_999, n0 + 1_000_000_007));
        assert_eq!(
            (map.ns(t0), map.ns(t0 + 2_999_999_999)),
            (n0, n0 + 1_000_000_007)
        );
        assert!(map.ns(t0 + 1_500_000_000).abs_diff(n0 + 500_000_003) <= 1);
    }

    #[test]
    fn a_converted_event_is_never_earlier_than_the_threads_previous_one() {
        let map = TscMap::between((0, 1_000), (1_000, 2_000));
        let mut record = EventHead {
            kind: event::REGION_END,
            flags: event_flags::TSC,
            arg: 0,
            timestamp_ns: 500,
        }
        .as_bytes()
        .to_vec();
        let mut last = 1_700;
        let head = to_monotonic(&mut record, &map, &mut last).unwrap();
        assert_eq!((head.timestamp_ns, head.flags, last), (1_700, 0, 1_700));
        let stored = read::<EventHead>(&record).unwrap();
        assert_eq!((stored.timestamp_ns, stored.flags), (1_700, 0));
        // Already in nanoseconds: left alone, `last` untouched.
        let mut last = 0;
        let head = to_monotonic(&mut record, &map, &mut last).unwrap();
        assert_eq!((head.timestamp_ns, last), (1_700, 0));
    }

    #[test]
    fn real_counter_readings_convert_to_the_clock_within_a_microsecond() {
        if !strobe_core::clock::tsc_is_reliable() {
            eprintln!("skipped: the kernel does not keep time with an invariant TSC here");
            return;
        }
        let from = strobe_core::clock::tsc_pair();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (ticks, ns) = strobe_core::clock::tsc_pair();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let map = TscMap::between(from, strobe_core::clock::tsc_pair());
        let error = map.ns(ticks) as i64 - ns as i64;
        assert!(
            error.abs() < 1_000,
            "converted {error} ns away from the clock"
        );
    }
}
