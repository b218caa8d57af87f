//! Causal profiling inside the program (Coz's virtual speedups): the
//! after-sample hook, the delay rules around blocking, and progress
//! points.
//!
//! The collector decides experiments: it publishes the code in scope, the
//! code an experiment selects and the delay one selected sample is worth
//! (`strobe_wire::causal`). Here, every sample's first in-scope frame
//! is checked against the selection; a selected sample adds its delay to
//! the process's global delay count and to the sampled thread's own count
//! (it "ran faster"), and any thread whose own count is behind the global
//! one pauses for the difference. A thread about to wake another pays
//! what it owes first; a thread woken by another is credited the delay
//! inserted while it was blocked (its waker paid it), so no delay counts
//! twice.
//!
//! Owns the hook (**runs in the signal handler**: atomics and
//! `clock_nanosleep`/`clock_gettime` system calls only, no allocation, no
//! lock) and the rules' entry points for the wrappers in
//! [`crate::causal_wrap`]. Never chooses what to select or how long an
//! experiment runs.

use crate::events::my_slot;
use crate::state::{current, Runtime};
use std::sync::atomic::{AtomicBool, Ordering};
use strobe_wire::causal::{point_kind, CausalArea};
use strobe_wire::segment::Slot;

/// Whether this process is profiled causally (one load on every wrapped
/// call).
static ON: AtomicBool = AtomicBool::new(false);

/// Turns causal profiling on for `rt` if its configuration asks for it.
/// Before any thread is sampled.
pub fn begin(rt: &Runtime) {
    let on = rt.config.causal;
    ON.store(on, Ordering::Release);
    if on {
        rt.segment.causal().enabled.store(1, Ordering::Release);
        strobe_sampler::set_after_sample(Some(after_sample));
    }
}

/// Whether this process is profiled causally.
#[inline(always)]
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// The causal area and the calling thread's slot, when the process is
/// profiled causally and the thread has a slot.
#[inline]
fn mine() -> Option<(&'static CausalArea, &'static Slot)> {
    if !ON.load(Ordering::Relaxed) {
        return None;
    }
    let rt = current()?;
    let slot = my_slot(rt)?;
    Some((rt.segment.causal(), rt.segment.slot(slot)))
}

/// The after-sample hook: the sample stands for `periods` sampling
/// periods. **Signal handler.**
fn after_sample(slot: u32, frames: &[u64], periods: u32) {
    let Some(rt) = current() else {
        return;
    };
    let area = rt.segment.causal();
    let slot = rt.segment.slot(slot);
    if let Some(at) = first_in_scope(area, frames) {
        area.push_pc(at);
        if area.experiment_on.load(Ordering::Acquire) == 1
            && area.selected.contains(at) == Some(true)
        {
            area.selected_samples
                .fetch_add(u64::from(periods), Ordering::Relaxed);
            let delay = area.delay_ns.load(Ordering::Acquire) * u64::from(periods);
            if delay > 0 {
                // The sampled thread "ran faster": every other thread
                // waits, this one is even.
                slot.causal_local.fetch_add(delay, Ordering::AcqRel);
                area.global_delay.fetch_add(delay, Ordering::AcqRel);
            }
        }
    }
    catch_up(area, slot);
}

/// The address of the first frame in scope: the interrupted address, or a
/// call site (a return address minus one). **Signal handler.**
fn first_in_scope(area: &CausalArea, frames: &[u64]) -> Option<u64> {
    for (i, &pc) in frames.iter().enumerate() {
        let at = if i == 0 { pc } else { pc.wrapping_sub(1) };
        match area.scope.contains(at) {
            Some(true) => return Some(at),
            Some(false) => {}
            // The scope is being rewritten: this sample is not attributed.
            None => return None,
        }
    }
    None
}

/// A debt smaller than this is left for later (a sleep that short
/// mostly oversleeps).
const LEAST_PAUSE_NS: u64 = 20_000;
/// Most rounds of paying: delay inserted while a thread pauses is owed
/// too, so it pays again until even (a geometric series while the
/// speedup is below 100%), within reason.
const PAY_ROUNDS: u32 = 8;

/// Pauses the calling thread for the delay it owes, including what is
/// inserted while it pauses (so that a thread about to wait for a lock
/// is even when it starts waiting, not after it got the lock).
/// **Signal-handler safe.**
fn catch_up(area: &CausalArea, slot: &Slot) {
    for _ in 0..PAY_ROUNDS {
        let global = area.global_delay.load(Ordering::Acquire);
        let local = slot.causal_local.load(Ordering::Acquire);
        if global <= local + LEAST_PAUSE_NS {
            return;
        }
        let slept = sleep_ns(global - local);
        // What was slept, overshoot included: a thread that overslept has
        // paid part of the next delay already.
        slot.causal_local.fetch_add(slept, Ordering::AcqRel);
        area.paused_ns.fetch_add(slept, Ordering::Relaxed);
    }
}

/// `CLOCK_MONOTONIC` now, by the system call's vDSO path. **Signal-handler
/// safe.**
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer; clock_gettime is async-signal-safe.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleeps `ns` (to an absolute deadline, through interruptions) and
/// returns the time that passed. A raw system call: the program's
/// `clock_nanosleep` is interposed. **Signal-handler safe.**
fn sleep_ns(ns: u64) -> u64 {
    let start = monotonic_ns();
    let deadline = start + ns;
    let until = libc::timespec {
        tv_sec: (deadline / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: a valid timespec; no remainder wanted with TIMER_ABSTIME.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_clock_nanosleep,
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &until as *const libc::timespec,
                std::ptr::null_mut::<libc::timespec>(),
            )
        };
        if rc == 0 || monotonic_ns() >= deadline {
            break;
        }
    }
    monotonic_ns() - start
}

/// Before the calling thread wakes another (unlock, signal, post, exit):
/// it pays what it owes first, so the woken thread can be credited.
#[inline]
pub fn before_waking() {
    if let Some((area, slot)) = mine() {
        catch_up(area, slot);
    }
}

/// Before the calling thread blocks: it pays what it owes (the wait
/// absorbs it, as the program's slack would), then notes the global delay
/// so that it can be credited what is inserted while it waits.
#[inline]
pub fn before_blocking() {
    if let Some((area, slot)) = mine() {
        catch_up(area, slot);
        let global = area.global_delay.load(Ordering::Acquire);
        slot.causal_blocked_at.store(global, Ordering::Relaxed);
    }
}

/// After the calling thread blocked: `woken` when another thread of the
/// program woke it (that thread paid the delay inserted meanwhile, so it
/// is credited); after a timeout or an outside event it pays it.
#[inline]
pub fn after_blocking(woken: bool) {
    if let Some((area, slot)) = mine() {
        if woken {
            let global = area.global_delay.load(Ordering::Acquire);
            let at = slot.causal_blocked_at.load(Ordering::Relaxed);
            slot.causal_local
                .fetch_add(global.saturating_sub(at), Ordering::AcqRel);
        }
        catch_up(area, slot);
    }
}

/// The calling thread's delay count, for a thread it creates to inherit.
pub fn inheritable() -> Option<u64> {
    mine().map(|(_, slot)| slot.causal_local.load(Ordering::Acquire))
}

/// A new thread starts owing what its creator owed.
pub fn inherit(local: Option<u64>) {
    if let (Some(local), Some((_, slot))) = (local, mine()) {
        slot.causal_local.store(local, Ordering::Release);
    }
}

/// Counts a visit of a throughput progress point, or a begin/end of a
/// latency point. Progress points count whenever the runtime runs (so a
/// `strobe sample` run costs the same); only causal runs read them.
pub fn progress(name: &[u8], kind: u32, end: bool) {
    let Some(rt) = current() else {
        return;
    };
    crate::dormant::wake();
    let Some(point) = rt.segment.causal().point(name, kind) else {
        return;
    };
    if end && kind == point_kind::LATENCY {
        point.departures.fetch_add(1, Ordering::Relaxed);
    } else {
        point.visits.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::testing::SMALL;
    use strobe_wire::segment::Segment;

    #[test]
    fn a_samples_first_frame_in_scope_is_found_with_return_addresses_at_their_call() {
        let (segment, _fd) = Segment::create(SMALL, 1, 1, 0, (0, 0)).unwrap();
        let area = segment.causal();
        area.scope.publish(&[(0x1000, 0x2000), (0x5000, 0x6000)]);
        assert_eq!(first_in_scope(area, &[0x1000]), Some(0x1000));
        assert_eq!(first_in_scope(area, &[0x2000]), None, "the end is outside");
        assert_eq!(first_in_scope(area, &[0x300, 0x1800]), Some(0x17ff));
        // A return address just past the end: its call lies inside.
        assert_eq!(first_in_scope(area, &[0x300, 0x2000]), Some(0x1fff));
        // A return address at the start: its call lies before.
        assert_eq!(first_in_scope(area, &[0x300, 0x1000, 0x5800]), Some(0x57ff));
        assert_eq!(first_in_scope(area, &[0x300, 0x400]), None);
        assert_eq!(first_in_scope(area, &[]), None);
        assert_eq!(first_in_scope(area, &[0x300, 0]), None, "no overflow");
    }

    #[test]
    fn a_thread_pays_what_it_owes_and_leaves_a_small_debt_for_later() {
        let (segment, _fd) = Segment::create(SMALL, 1, 1, 0, (0, 0)).unwrap();
        let area = segment.causal();
        let slot = segment.slot(segment.claim_slot(1).unwrap());
        area.global_delay.store(1_000_000, Ordering::Relaxed);
        slot.causal_local
            .store(1_000_000 - LEAST_PAUSE_NS, Ordering::Relaxed);
        catch_up(area, slot);
        assert_eq!(
            slot.causal_local.load(Ordering::Relaxed),
            1_000_000 - LEAST_PAUSE_NS,
            "too small to sleep for"
        );
        assert_eq!(area.paused_ns.load(Ordering::Relaxed), 0);
        // A debt just past the threshold is slept off, overshoot included.
        let before = 1_000_000 - LEAST_PAUSE_NS - 1;
        slot.causal_local.store(before, Ordering::Relaxed);
        catch_up(area, slot);
        let after = slot.causal_local.load(Ordering::Relaxed);
        assert!(after >= 1_000_000 - LEAST_PAUSE_NS, "paid: {after}");
        assert_eq!(area.paused_ns.load(Ordering::Relaxed), after - before);
        // Ahead of the others (credited while blocked): nothing to pay.
        slot.causal_local.store(2_000_000, Ordering::Relaxed);
        catch_up(area, slot);
        assert_eq!(slot.causal_local.load(Ordering::Relaxed), 2_000_000);
    }
}
