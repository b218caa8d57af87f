//! The causal-profiling area of a segment: what the collector's experiment
//! controller and the program's sampling signal handler share.
//!
//! The controller (in the collector) publishes the code in scope and the
//! code an experiment selects as sorted address ranges, and the delay one
//! selected sample is worth; the handler (in the program) finds each
//! sample's first in-scope frame, counts selected samples, adds their
//! delay to the process's global delay count and pauses threads that owe
//! delay. Progress points are counters here too, claimed by name.
//!
//! Owns the layout and the lock-free protocols (sequence-numbered range
//! tables, the ring of in-scope addresses, progress point claiming). The
//! program side of every function here is **signal-handler safe**: atomics
//! only, no allocation, no lock, no system call.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// In-scope addresses the ring keeps (power of two).
pub const PC_RING: usize = 8192;
/// Progress points a process can name.
pub const MAX_POINTS: usize = 256;
/// Bytes of a progress point's name (longer names are cut).
pub const POINT_NAME_BYTES: usize = 80;
/// Address ranges an experiment's selection can have.
pub const MAX_SELECTED_RANGES: usize = 1024;
/// Address ranges the scope can have.
pub const MAX_SCOPE_RANGES: usize = 65536;

/// Progress point kinds.
pub mod point_kind {
    /// Each visit is one unit of work done.
    pub const THROUGHPUT: u32 = 1;
    /// Begin/end pairs: work in flight.
    pub const LATENCY: u32 = 2;
}

/// Progress point states.
mod point_state {
    pub const FREE: u32 = 0;
    pub const NAMING: u32 = 1;
    pub const NAMED: u32 = 2;
}

/// One named progress point.
#[repr(C, align(64))]
pub struct ProgressPoint {
    state: AtomicU32,
    /// See [`point_kind`].
    pub kind: AtomicU32,
    name_len: AtomicU32,
    _pad: u32,
    name: UnsafeCell<[u8; POINT_NAME_BYTES]>,
    /// Throughput visits, or latency begins.
    pub visits: AtomicU64,
    /// Latency ends.
    pub departures: AtomicU64,
}

/// A sorted table of disjoint `[start, end)` address ranges, rewritten by
/// one writer while readers check addresses against it. A reader that
/// overlaps a rewrite learns so (the sequence number changed) and treats
/// the address as unknown.
#[repr(C)]
pub struct RangeTable<const N: usize> {
    seq: AtomicU64,
    len: AtomicU64,
    ranges: [[AtomicU64; 2]; N],
}

impl<const N: usize> RangeTable<N> {
    /// Replaces the table with `ranges` (sorted, disjoint), keeping the
    /// first `N`. Returns how many were kept. One writer at a time.
    pub fn publish(&self, ranges: &[(u64, u64)]) -> usize {
        let n = ranges.len().min(N);
        self.seq.fetch_add(1, Ordering::AcqRel);
        self.len.store(0, Ordering::Release);
        for (slot, &(start, end)) in self.ranges.iter().zip(&ranges[..n]) {
            slot[0].store(start, Ordering::Relaxed);
            slot[1].store(end, Ordering::Relaxed);
        }
        self.len.store(n as u64, Ordering::Release);
        self.seq.fetch_add(1, Ordering::AcqRel);
        n
    }

    /// Whether `address` lies in a range; `None` while the table is being
    /// rewritten. **Signal-handler safe.**
    pub fn contains(&self, address: u64) -> Option<bool> {
        let before = self.seq.load(Ordering::Acquire);
        if before & 1 == 1 {
            return None;
        }
        let len = (self.len.load(Ordering::Acquire) as usize).min(N);
        // Binary search for the last range starting at or before address.
        let (mut lo, mut hi) = (0usize, len);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.ranges[mid][0].load(Ordering::Relaxed) <= address {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let found = lo > 0 && address < self.ranges[lo - 1][1].load(Ordering::Relaxed);
        (self.seq.load(Ordering::Acquire) == before).then_some(found)
    }

    /// How many ranges the table holds.
    pub fn len(&self) -> usize {
        (self.len.load(Ordering::Acquire) as usize).min(N)
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The causal area of a segment. Zero (untouched) unless the process is
/// profiled causally.
#[repr(C)]
pub struct CausalArea {
    /// Set by the runtime when the process takes part in causal
    /// profiling.
    pub enabled: AtomicU32,
    /// 1 while an experiment runs (its selection is published).
    pub experiment_on: AtomicU32,
    /// Delay (ns) that one sample in the selection is worth: speedup ×
    /// sampling period. 0 in a control experiment.
    pub delay_ns: AtomicU64,
    /// Delay (ns) every thread of the process owes since the start.
    pub global_delay: AtomicU64,
    /// Samples that fell in the selection while an experiment ran.
    pub selected_samples: AtomicU64,
    /// Delay (ns) threads actually slept.
    pub paused_ns: AtomicU64,
    /// In-scope addresses written so far (the ring's next index).
    pub pc_head: AtomicU64,
    /// The first in-scope address of each recent sample (0 = none yet).
    pcs: [AtomicU64; PC_RING],
    points: [ProgressPoint; MAX_POINTS],
    /// The code the running experiment selects.
    pub selected: RangeTable<MAX_SELECTED_RANGES>,
    /// The code in scope.
    pub scope: RangeTable<MAX_SCOPE_RANGES>,
}

// SAFETY: every field is atomic except progress point names, written once
// by the claimer before the state becomes NAMED (release) and read only
// after seeing NAMED (acquire).
unsafe impl Sync for CausalArea {}

impl CausalArea {
    /// Appends the first in-scope address of a sample. **Signal-handler
    /// safe.**
    /// Threads push at once: each takes its own index (a reader may see
    /// an index before its address is stored, and then reads the address
    /// the slot held before: a sample misattributed, never a crash).
    pub fn push_pc(&self, address: u64) {
        let at = self.pc_head.fetch_add(1, Ordering::AcqRel);
        self.pcs[at as usize % PC_RING].store(address, Ordering::Release);
    }

    /// The in-scope addresses written since `from` (the ring's index), and
    /// the new index. Addresses overwritten before they were read are
    /// skipped (the count of them is `new − from − returned`).
    pub fn pcs_since(&self, from: u64, out: &mut Vec<u64>) -> u64 {
        let head = self.pc_head.load(Ordering::Acquire);
        let first = from.max(head.saturating_sub(PC_RING as u64));
        for at in first..head {
            let pc = self.pcs[at as usize % PC_RING].load(Ordering::Relaxed);
            if pc != 0 {
                out.push(pc);
            }
        }
        head
    }

    /// The progress point named `name` of `kind`, claimed if new; `None`
    /// when all are taken. Lock-free; called outside signal handlers.
    pub fn point(&self, name: &[u8], kind: u32) -> Option<&ProgressPoint> {
        let name = &name[..name.len().min(POINT_NAME_BYTES)];
        for p in &self.points {
            loop {
                match p.state.load(Ordering::Acquire) {
                    point_state::NAMED => {
                        if p.name() == name && p.kind.load(Ordering::Relaxed) == kind {
                            return Some(p);
                        }
                        break;
                    }
                    point_state::FREE => {
                        if p.state
                            .compare_exchange(
                                point_state::FREE,
                                point_state::NAMING,
                                Ordering::AcqRel,
                                Ordering::Acquire,
                            )
                            .is_ok()
                        {
                            // SAFETY: the NAMING state gives this thread the
                            // name alone until it publishes NAMED.
                            unsafe { (&mut *p.name.get())[..name.len()].copy_from_slice(name) };
                            p.name_len.store(name.len() as u32, Ordering::Relaxed);
                            p.kind.store(kind, Ordering::Relaxed);
                            p.state.store(point_state::NAMED, Ordering::Release);
                            return Some(p);
                        }
                    }
                    // Another thread is naming it: wait for the name.
                    _ => std::hint::spin_loop(),
                }
            }
        }
        None
    }

    /// The named progress points.
    pub fn points(&self) -> impl Iterator<Item = &ProgressPoint> {
        self.points
            .iter()
            .take_while(|p| p.state.load(Ordering::Acquire) != point_state::FREE)
            .filter(|p| p.state.load(Ordering::Acquire) == point_state::NAMED)
    }
}

impl ProgressPoint {
    /// The name (valid once the point is named).
    pub fn name(&self) -> &[u8] {
        let len = (self.name_len.load(Ordering::Relaxed) as usize).min(POINT_NAME_BYTES);
        // SAFETY: the name is written once before NAMED and never after.
        unsafe { &(&*self.name.get())[..len] }
    }
}

/// Bytes the causal area takes in a segment (whole pages).
pub const CAUSAL_BYTES: usize = (std::mem::size_of::<CausalArea>() + 4095) & !4095;

#[cfg(test)]
mod tests {
    use super::*;

    fn zeroed() -> Box<CausalArea> {
        let layout = std::alloc::Layout::new::<CausalArea>();
        // SAFETY: CausalArea is all atomics and bytes: all-zero is valid.
        unsafe { Box::from_raw(std::alloc::alloc_zeroed(layout) as *mut CausalArea) }
    }

    #[test]
    fn ranges_answer_membership_at_their_edges() {
        let area = zeroed();
        assert_eq!(area.scope.contains(5), Some(false));
        area.scope.publish(&[(10, 20), (30, 31), (100, 200)]);
        for (address, inside) in [(9, false), (10, true), (19, true), (20, false), (30, true)] {
            assert_eq!(area.scope.contains(address), Some(inside), "{address}");
        }
        assert_eq!(area.scope.contains(31), Some(false));
        assert_eq!(area.scope.contains(150), Some(true));
        assert_eq!(area.scope.contains(u64::MAX), Some(false));
        area.scope.publish(&[]);
        assert_eq!(area.scope.contains(150), Some(false));
    }

    #[test]
    fn points_are_claimed_once_per_name_and_kind() {
        let area = zeroed();
        let a = area.point(b"requests", point_kind::THROUGHPUT).unwrap() as *const _;
        let b = area.point(b"requests", point_kind::THROUGHPUT).unwrap() as *const _;
        let c = area.point(b"requests", point_kind::LATENCY).unwrap() as *const _;
        assert_eq!(a, b);
        assert_ne!(a, c);
        let names: Vec<_> = area.points().map(|p| p.name().to_vec()).collect();
        assert_eq!(names, vec![b"requests".to_vec(), b"requests".to_vec()]);
        let long = vec![b'x'; 200];
        assert_eq!(area.point(&long, 1).unwrap().name().len(), POINT_NAME_BYTES);
    }

    #[test]
    fn the_pc_ring_returns_what_was_not_overwritten() {
        let area = zeroed();
        let mut out = Vec::new();
        for pc in 1..=10 {
            area.push_pc(pc);
        }
        let at = area.pcs_since(0, &mut out);
        assert_eq!((at, out.len()), (10, 10));
        for pc in 0..PC_RING as u64 + 5 {
            area.push_pc(pc + 100);
        }
        out.clear();
        let next = area.pcs_since(at, &mut out);
        assert_eq!(next, at + PC_RING as u64 + 5);
        assert_eq!(out.len(), PC_RING);
        assert_eq!(*out.last().unwrap(), PC_RING as u64 + 104);
    }
}
