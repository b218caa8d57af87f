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

use crate::batch::Batch;
use crate::described::{describe, sample_counters};
use crate::source::Source;
use crate::Options;
use std::collections::{BTreeMap, HashSet};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use strobe_core::clock::now_ns;
use strobe_core::timewindow::{ClockReader, WindowClock, WindowEvaluator};
use strobe_wire::record::{event, event_flags, read, EventHead, MpiCallBody, EVENT_HEAD_BYTES};
use strobe_wire::segment::{exec_reason, slot_state, state, Segment};

/// Blocking the sampling signal for this long in total is reported.
const BLOCKED_REPORT_NS: u64 = 50_000_000;

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

/// Whether a sampler with `timing` takes samples `elapsed_ns` after the
/// process started, its time windows saying `windows_on`: after its delay,
/// for its duration (0: until the end).
fn sampling_on(timing: &crate::Timing, elapsed_ns: u64, windows_on: bool) -> bool {
    windows_on
        && elapsed_ns >= timing.delay_ns
        && (timing.duration_ns == 0
            || elapsed_ns < timing.delay_ns.saturating_add(timing.duration_ns))
}

/// What a `CHILD` event (already converted, its head `head`, its bytes
/// after the head `bytes`) says, into `found`: a child to wait for, or a
/// process that runs an image without the runtime. Records too short to
/// name a pid say nothing.
fn note_child(head: &EventHead, bytes: &[u8], found: &mut Found) {
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
#[derive(Debug, PartialEq, Eq)]
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
        let command = describe(&segment).command();
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
            let on = sampling_on(timing, elapsed, windows_on);
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
                note_child(&head, &record[EVENT_HEAD_BYTES..], found);
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

    /// Seeded: the same values on every run.
    struct Rng(fastrand::Rng);

    impl Rng {
        fn new(seed: u64) -> Rng {
            Rng(fastrand::Rng::with_seed(seed))
        }

        fn next(&mut self) -> u64 {
            self.0.u64(..)
        }

        /// A value below `2^bits` (at least 1 bit).
        fn bits(&mut self, bits: u32) -> u64 {
            self.next() >> (64 - bits.clamp(1, 64))
        }
    }

    /// `floor(a * b / c)` exactly (`a * b` must fit in 128 bits).
    fn muldiv(a: u64, b: u64, c: u64) -> u128 {
        u128::from(a) * u128::from(b) / u128::from(c)
    }

    #[test]
    fn ticks_convert_within_the_fixed_points_bound_of_exact_arithmetic() {
        let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
        for case in 0..20_000 {
            // Spans from a few ticks to days of a GHz counter and beyond,
            // counters at any size, clocks at ratios from 1/16 to 16 ns
            // per tick.
            let span = 1 + rng.bits(1 + (case % 62) as u32);
            let ns_span = match case % 4 {
                0 => span,
                1 => (span / (1 + rng.bits(4))).max(1),
                2 => span.saturating_mul(1 + rng.bits(4)).min(1 << 62),
                _ => 1 + rng.bits(1 + (case % 60) as u32),
            };
            let t0 = rng.next() >> 1;
            let n0 = rng.next() >> 2;
            let (t1, n1) = (t0 + span, n0 + ns_span);
            let map = TscMap::between((t0, n0), (t1, n1));
            assert_eq!(map.ns(t0), n0, "case {case}: exact at the first reading");
            assert_eq!(map.ns(t1), n1, "case {case}: exact at the second");
            // Between the readings and a little past the second (written
            // during the copy).
            for k in 0..8 {
                let d = if k < 6 {
                    rng.next() % (span + 1)
                } else {
                    span + rng.next() % (span / 4 + 1)
                };
                let t = t0 + d;
                let exact = u128::from(n0) + muldiv(d, ns_span, span);
                let got = u128::from(map.ns(t));
                let slack = u128::from(d.div_ceil(1 << 32));
                assert!(
                    exact <= got && got <= exact + slack,
                    "case {case}: ({t0}, {n0}) → ({t1}, {n1}) at {t}: {got}, exact {exact}"
                );
                if t <= t1 {
                    assert!(
                        got <= u128::from(n1),
                        "case {case}: past the second reading"
                    );
                }
            }
            // Never backwards as the ticks grow.
            let mut ticks: Vec<u64> = (0..16).map(|_| t0 + rng.next() % (2 * span)).collect();
            ticks.sort_unstable();
            let converted: Vec<u64> = ticks.iter().map(|&t| map.ns(t)).collect();
            assert!(
                converted.windows(2).all(|w| w[0] <= w[1]),
                "case {case}: {ticks:?} → {converted:?}"
            );
            assert!(converted[0] >= n0);
        }
    }

    #[test]
    fn ticks_before_the_first_reading_go_back_linearly_and_stop_at_zero() {
        let map = TscMap::between((1_000, 5_000), (3_000, 6_000));
        assert_eq!(map.ns(0), 4_500);
        assert_eq!(map.ns(999), 5_000 - 1, "rounded down");
        let map = TscMap::between((1_000_000, 10), (2_000_000, 1_000_010));
        assert_eq!(map.ns(0), 0, "not below the clock's zero");
        assert_eq!(map.ns(999_990), 0);
        assert_eq!(map.ns(999_991), 1);
    }

    #[test]
    fn readings_that_do_not_advance_map_every_tick_to_the_second() {
        // The counter wrapped, was reset, or the program wrote its anchor:
        // no ratio can be had.
        for (from, to) in [
            ((u64::MAX - 10, 100), (5, 200)),
            ((7, 100), (7, 200)),
            ((9, 100), (8, 50)),
        ] {
            let map = TscMap::between(from, to);
            for t in [0, 6, 7, 8, u64::MAX - 10, u64::MAX] {
                assert_eq!(map.ns(t), to.1, "{from:?} → {to:?} at {t}");
            }
        }
    }

    #[test]
    fn any_readings_and_ticks_convert_without_overflow_or_panic() {
        let mut rng = Rng::new(42);
        let edge = [0, 1, u64::MAX, u64::MAX - 1, 1 << 63, (1 << 63) - 1];
        let pick = |rng: &mut Rng| {
            if rng.next().is_multiple_of(3) {
                edge[(rng.next() % edge.len() as u64) as usize]
            } else {
                rng.next()
            }
        };
        for _ in 0..50_000 {
            let (t0, n0, t1, n1, t) = (
                pick(&mut rng),
                pick(&mut rng),
                pick(&mut rng),
                pick(&mut rng),
                pick(&mut rng),
            );
            let got = TscMap::between((t0, n0), (t1, n1)).ns(t);
            if t1 <= t0 {
                assert_eq!(got, n1);
            } else if t <= t1 {
                assert!(got <= n1, "({t0}, {n0}) → ({t1}, {n1}) at {t}: {got}");
            }
        }
        // The largest ratio and span: saturates at the clock's end.
        let map = TscMap::between((0, 0), (1, u64::MAX));
        assert_eq!(map.ns(1), u64::MAX);
        assert_eq!(map.ns(u64::MAX), u64::MAX);
    }

    #[test]
    fn an_mpi_calls_entry_converts_with_its_end() {
        use strobe_wire::record::{as_bytes, mpi_fields};
        let map = TscMap::between((0, 1_000), (1_000, 2_000));
        let body = MpiCallBody {
            begin_ns: 200,
            fields: mpi_fields::TICKS | mpi_fields::BYTES,
            ..Default::default()
        };
        let mut record = EventHead {
            kind: event::MPI_CALL,
            flags: event_flags::TSC,
            arg: 0,
            timestamp_ns: 600,
        }
        .as_bytes()
        .to_vec();
        record.extend_from_slice(as_bytes(&body));
        record.extend_from_slice(b"world");
        let mut last = 0;
        let head = to_monotonic(&mut record, &map, &mut last).unwrap();
        assert_eq!((head.timestamp_ns, last), (1_600, 1_600));
        let body = read::<MpiCallBody>(&record[EVENT_HEAD_BYTES..]).unwrap();
        assert_eq!((body.begin_ns, body.fields), (1_200, mpi_fields::BYTES));
        assert_eq!(&record[EVENT_HEAD_BYTES + 64..], b"world");
        // Too short for a head: nothing read, nothing changed.
        let mut short = vec![1u8; EVENT_HEAD_BYTES - 1];
        assert!(to_monotonic(&mut short, &map, &mut last).is_none());
        assert_eq!(short, vec![1u8; EVENT_HEAD_BYTES - 1]);
    }

    #[test]
    fn a_sampler_is_on_after_its_delay_for_its_duration_within_its_windows() {
        let timing = |delay_ns, duration_ns| crate::Timing {
            delay_ns,
            duration_ns,
            period_ns: 1,
        };
        assert!(sampling_on(&timing(0, 0), 0, true));
        assert!(!sampling_on(&timing(0, 0), 0, false), "outside its windows");
        assert!(!sampling_on(&timing(100, 0), 99, true));
        assert!(sampling_on(&timing(100, 0), 100, true));
        assert!(
            sampling_on(&timing(100, 0), u64::MAX, true),
            "until the end"
        );
        assert!(sampling_on(&timing(100, 50), 149, true));
        assert!(!sampling_on(&timing(100, 50), 150, true));
        // A delay and a duration whose sum overflows: on until the end.
        assert!(sampling_on(
            &timing(u64::MAX - 1, u64::MAX),
            u64::MAX - 1,
            true
        ));
    }

    fn push_event(segment: &Segment, slot: u32, kind: u16, arg: u32, ts: u64, bytes: &[u8]) {
        let head = EventHead {
            kind,
            flags: 0,
            arg,
            timestamp_ns: ts,
        };
        assert!(segment.event_ring(slot).push(&[head.as_bytes(), bytes]));
    }

    fn sample_bytes(tid: i32) -> Vec<u8> {
        let head = strobe_wire::sample::SampleHead {
            tid,
            depth: 1,
            ..Default::default()
        };
        let mut bytes = strobe_wire::record::as_bytes(&head).to_vec();
        bytes.extend_from_slice(&0x1234u64.to_ne_bytes());
        bytes
    }

    #[test]
    fn a_child_event_names_a_child_or_a_process_without_the_runtime() {
        let head = |arg| EventHead {
            kind: event::CHILD,
            flags: 0,
            arg,
            timestamp_ns: 1,
        };
        let mut found = Found::default();
        note_child(&head(exec_reason::NONE), &4242i32.to_le_bytes(), &mut found);
        let mut bytes = 4343i32.to_le_bytes().to_vec();
        bytes.extend_from_slice(b"/bin/static");
        note_child(&head(exec_reason::STATIC), &bytes, &mut found);
        note_child(
            &head(exec_reason::SETUID),
            &(-5i32).to_le_bytes(),
            &mut found,
        );
        // Too short to name a pid, or another kind: nothing.
        note_child(&head(exec_reason::NONE), &[1, 2, 3], &mut found);
        let mark = EventHead {
            kind: event::MARK,
            ..head(exec_reason::NONE)
        };
        note_child(&mark, &4444i32.to_le_bytes(), &mut found);
        assert_eq!(found.children, [4242]);
        assert_eq!(
            found.without_runtime,
            [
                WithoutRuntime {
                    pid: 4343,
                    reason: exec_reason::STATIC,
                    image: b"/bin/static".to_vec()
                },
                WithoutRuntime {
                    pid: -5,
                    reason: exec_reason::SETUID,
                    image: Vec::new()
                }
            ]
        );
    }

    /// A tap on a fresh segment of `slots` slots whose time-stamp counter
    /// anchor is `anchor`.
    fn tap(slots: u32, anchor: (u64, u64)) -> (Tap, Arc<Segment>) {
        let layout = strobe_wire::segment::Layout {
            slots,
            sample_ring_bytes: 4096,
            event_ring_bytes: 4096,
        };
        let pid = std::process::id() as i32;
        let (segment, _fd) = Segment::create(layout, pid, 1, 0, anchor).unwrap();
        let segment = Arc::new(segment);
        let options = crate::fuzz::options_for(&std::env::temp_dir());
        let pidfd: OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
        (Tap::new(1, pid, segment.clone(), pidfd, &options), segment)
    }

    #[test]
    fn a_copy_takes_every_event_ring_before_any_sample_ring_and_frees_ended_slots() {
        let (mut tap, seg) = tap(2, (0, 0));
        let a = seg.claim_slot(100).unwrap();
        let b = seg.claim_slot(200).unwrap();
        assert!(seg.sample_ring(a).push(&[&sample_bytes(100)]));
        push_event(&seg, a, event::THREAD_START, 0, 10, b"main");
        push_event(&seg, a, event::CHILD, 0, 11, &4242i32.to_le_bytes());
        let mut spawned = 4343i32.to_le_bytes().to_vec();
        spawned.extend_from_slice(b"/bin/static");
        push_event(&seg, a, event::CHILD, exec_reason::STATIC, 12, &spawned);
        push_event(&seg, b, event::THREAD_END, 0, 13, &[0; 8]);
        let counters = &seg.slot(b);
        counters.taken.store(5, Ordering::Relaxed);
        counters.lost_full.store(1, Ordering::Relaxed);
        counters.lost_altstack.store(2, Ordering::Relaxed);
        seg.end_slot(b);
        let (mut batch, mut found) = (Batch::default(), Found::default());
        tap.drain(&mut batch, &mut found);
        let order: Vec<(Source, i32)> = batch.records.iter().map(|(s, t, _)| (*s, *t)).collect();
        assert_eq!(
            order,
            [
                (Source::Events, 100),
                (Source::Events, 100),
                (Source::Events, 100),
                (Source::Events, 200),
                (Source::Samples, 100)
            ]
        );
        let kinds: Vec<u16> = batch.records[..4]
            .iter()
            .map(|(_, _, r)| read::<EventHead>(&batch.bytes[r.clone()]).unwrap().kind)
            .collect();
        assert_eq!(
            kinds,
            [
                event::THREAD_START,
                event::CHILD,
                event::CHILD,
                event::THREAD_END
            ]
        );
        assert_eq!(found.children, [4242]);
        assert_eq!(found.without_runtime.len(), 1);
        assert_eq!(found.without_runtime[0].image, b"/bin/static");
        // The ended thread's slot is free again, its counters kept once.
        assert_eq!(seg.slot(b).state.load(Ordering::Relaxed), slot_state::FREE);
        assert_eq!(seg.slot(a).state.load(Ordering::Relaxed), slot_state::LIVE);
        assert_eq!(batch.retired, [5, 1, 0, 0, 0, 2]);
        assert!(batch.corrupt.is_empty());
        let (mut again, mut found) = (Batch::default(), Found::default());
        tap.drain(&mut again, &mut found);
        assert!(again.is_empty(), "nothing new, nothing counted twice");
        assert!(found.children.is_empty());
    }

    #[test]
    fn a_damaged_ring_is_named_and_the_others_are_still_copied() {
        let (mut tap, seg) = tap(2, (0, 0));
        let a = seg.claim_slot(100).unwrap();
        let b = seg.claim_slot(200).unwrap();
        push_event(&seg, a, event::MARK, 1, 1, b"");
        push_event(&seg, b, event::MARK, 2, 2, b"");
        // The program wrote over slot a's ring: a length past the ring.
        seg.slot(a).event_head.0.store(1 << 40, Ordering::Relaxed);
        let (mut batch, mut found) = (Batch::default(), Found::default());
        tap.drain(&mut batch, &mut found);
        assert_eq!(batch.corrupt, [(100, Source::Events)]);
        assert!(batch
            .records
            .iter()
            .any(|(s, tid, _)| *s == Source::Events && *tid == 200));
    }

    #[test]
    fn event_ticks_become_clock_times_between_the_anchor_and_the_copy() {
        let anchor = strobe_core::clock::tsc_pair();
        let (mut tap, seg) = tap(1, anchor);
        let a = seg.claim_slot(100).unwrap();
        let ticks = [strobe_core::clock::cycles(), strobe_core::clock::cycles()];
        for t in ticks {
            let head = EventHead {
                kind: event::MARK,
                flags: event_flags::TSC,
                arg: 0,
                timestamp_ns: t,
            };
            assert!(seg.event_ring(a).push(&[head.as_bytes()]));
        }
        let (mut batch, mut found) = (Batch::default(), Found::default());
        tap.drain(&mut batch, &mut found);
        let after = now_ns();
        let times: Vec<EventHead> = batch
            .records
            .iter()
            .map(|(_, _, r)| read::<EventHead>(&batch.bytes[r.clone()]).unwrap())
            .collect();
        assert_eq!(times.len(), 2);
        for head in &times {
            assert_eq!(head.flags, 0, "converted");
            assert!(
                (anchor.1..=after).contains(&head.timestamp_ns),
                "{} not in {}..={after}",
                head.timestamp_ns,
                anchor.1
            );
        }
        assert!(times[0].timestamp_ns <= times[1].timestamp_ns);
    }

    #[test]
    fn an_exec_into_an_image_without_the_runtime_is_found_once() {
        let (mut tap, seg) = tap(1, (0, 0));
        let (mut batch, mut found) = (Batch::default(), Found::default());
        // About to exec an image that will have the runtime: nothing.
        seg.note_exec(b"/bin/dynamic", exec_reason::NONE);
        tap.drain(&mut batch, &mut found);
        assert!(found.without_runtime.is_empty());
        // A static image: this test process maps no runtime, as the new
        // image would not.
        seg.note_exec(b"/bin/static", exec_reason::STATIC);
        tap.drain(&mut batch, &mut found);
        assert_eq!(
            found.without_runtime,
            [WithoutRuntime {
                pid: std::process::id() as i32,
                reason: exec_reason::STATIC,
                image: b"/bin/static".to_vec()
            }]
        );
        assert!(tap.replaced_by_image_without_runtime());
        let mut again = Found::default();
        tap.drain(&mut batch, &mut again);
        assert!(again.without_runtime.is_empty(), "said once");
    }

    #[test]
    fn the_samplers_flags_follow_the_timing() {
        let (mut tap, seg) = tap(1, (0, 0));
        let mut options = crate::fuzz::options_for(&std::env::temp_dir());
        // The segment started at 0: the process is old by now.
        options.timing[0].delay_ns = 0;
        options.timing[1].delay_ns = u64::MAX / 2;
        tap.control(&options);
        let flags: Vec<u32> = seg
            .header()
            .sampling_on
            .iter()
            .map(|f| f.load(Ordering::Relaxed))
            .collect();
        assert_eq!(flags, [1, 0]);
        options.timing[0].duration_ns = 1;
        options.timing[1].delay_ns = 0;
        tap.control(&options);
        let flags: Vec<u32> = seg
            .header()
            .sampling_on
            .iter()
            .map(|f| f.load(Ordering::Relaxed))
            .collect();
        assert_eq!(flags, [0, 1]);
    }

    #[test]
    fn real_counter_readings_convert_to_the_clock_within_a_microsecond() {
        if !strobe_core::clock::tsc_is_reliable() {
            eprintln!("skipped: the kernel does not keep time with an invariant TSC here");
            return;
        }
        // Readings as `tsc_pair` takes them, but only those nothing
        // interrupted (a preemption or a VM exit between the counter and
        // the clock puts the pair microseconds off on a busy machine).
        let undisturbed = || {
            (0..100_000).find_map(|_| {
                let before = strobe_core::clock::cycles();
                let ns = now_ns();
                let after = strobe_core::clock::cycles();
                (after - before < 1_000).then_some((before + (after - before) / 2, ns))
            })
        };
        let mut readings = Vec::new();
        for k in 0..3 {
            if k > 0 {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            let Some(pair) = undisturbed() else {
                eprintln!("skipped: no reading of the counter and the clock went uninterrupted");
                return;
            };
            readings.push(pair);
        }
        let [from, (ticks, ns), to] = readings[..] else {
            unreachable!("three readings")
        };
        let map = TscMap::between(from, to);
        let error = map.ns(ticks) as i64 - ns as i64;
        assert!(
            error.abs() < 1_000,
            "converted {error} ns away from the clock"
        );
    }
}
