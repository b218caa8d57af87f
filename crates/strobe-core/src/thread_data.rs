//! Per-thread data storage that grows without limit.
//!
//! Seed 000's profiler kept thread data in a fixed array of 2048 slots and
//! crashed when a program created more threads. [`ThreadData`] is a
//! segmented array: segment *k* holds `64 << k` slots and is allocated the
//! first time an index in it is used, so existing entries never move and
//! capacity grows by doubling.
//!
//! Owns the storage only. [`ThreadData::get`] never allocates or locks and
//! is safe to call from a signal handler; inserting allocates and must
//! happen on ordinary code paths (thread start).

use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

const FIRST_SEGMENT: usize = 64;
const SEGMENTS: usize = 40;

/// A lock-free, append-only map from a small integer (a thread's sequent
/// or internal id) to a `T` that lives as long as the map.
pub struct ThreadData<T> {
    segments: [AtomicPtr<AtomicPtr<T>>; SEGMENTS],
}

// SAFETY: values are shared between threads only by `&T` (requires `T:
// Sync`) and are dropped by whichever thread drops the map (requires `T:
// Send`); the slot pointers themselves are atomics.
unsafe impl<T: Send + Sync> Sync for ThreadData<T> {}
// SAFETY: as above; the map owns its values.
unsafe impl<T: Send + Sync> Send for ThreadData<T> {}

impl<T> Default for ThreadData<T> {
    fn default() -> Self {
        Self::new()
    }
}

fn locate(index: u64) -> Option<(usize, usize)> {
    let pos = index.checked_add(FIRST_SEGMENT as u64)?;
    let segment = (63 - pos.leading_zeros()) as usize - FIRST_SEGMENT.trailing_zeros() as usize;
    if segment >= SEGMENTS {
        return None;
    }
    let offset = (pos - ((FIRST_SEGMENT as u64) << segment)) as usize;
    Some((segment, offset))
}

const fn segment_len(segment: usize) -> usize {
    FIRST_SEGMENT << segment
}

impl<T> ThreadData<T> {
    /// An empty map; usable in a `static`.
    pub const fn new() -> ThreadData<T> {
        ThreadData {
            segments: [const { AtomicPtr::new(ptr::null_mut()) }; SEGMENTS],
        }
    }

    /// The value at `index`, if one was inserted. Async-signal-safe: two
    /// atomic loads, no allocation, no lock.
    #[inline]
    pub fn get(&self, index: u64) -> Option<&T> {
        let (segment, offset) = locate(index)?;
        let slots = self.segments[segment].load(Ordering::Acquire);
        if slots.is_null() {
            return None;
        }
        // SAFETY: a non-null segment pointer points at `segment_len(segment)`
        // initialised atomics that live until the map is dropped; `offset` is
        // in range by construction of `locate`.
        let value = unsafe { &*slots.add(offset) }.load(Ordering::Acquire);
        // SAFETY: a non-null slot points at a leaked Box<T> owned by the map
        // and never freed before the map is dropped.
        (!value.is_null()).then(|| unsafe { &*value })
    }

    /// The value at `index`, inserting `make()` if there is none. When two
    /// threads race for the same index one value wins and the other is
    /// dropped. Allocates: not for signal handlers.
    ///
    /// # Panics
    /// If `index` is beyond the map's capacity (about 7·10^13).
    pub fn get_or_insert_with(&self, index: u64, make: impl FnOnce() -> T) -> &T {
        if let Some(v) = self.get(index) {
            return v;
        }
        let (segment, offset) = locate(index).expect("thread index beyond ThreadData capacity");
        let slots = self.segment(segment);
        // SAFETY: as in `get`.
        let slot = unsafe { &*slots.add(offset) };
        let fresh = Box::into_raw(Box::new(make()));
        match slot.compare_exchange(ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire) {
            // SAFETY: we just published `fresh`; it lives until the map drops.
            Ok(_) => unsafe { &*fresh },
            Err(winner) => {
                // SAFETY: `fresh` was never published; we still own it.
                drop(unsafe { Box::from_raw(fresh) });
                // SAFETY: `winner` is a published, live value.
                unsafe { &*winner }
            }
        }
    }

    fn segment(&self, segment: usize) -> *mut AtomicPtr<T> {
        let current = self.segments[segment].load(Ordering::Acquire);
        if !current.is_null() {
            return current;
        }
        let len = segment_len(segment);
        let fresh: Box<[AtomicPtr<T>]> =
            (0..len).map(|_| AtomicPtr::new(ptr::null_mut())).collect();
        let fresh = Box::into_raw(fresh) as *mut AtomicPtr<T>;
        match self.segments[segment].compare_exchange(
            ptr::null_mut(),
            fresh,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => fresh,
            Err(winner) => {
                // SAFETY: `fresh` came from a boxed slice of `len` elements
                // and was never published.
                drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(fresh, len)) });
                winner
            }
        }
    }

    /// Every (index, value) inserted so far, in index order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &T)> + '_ {
        (0..SEGMENTS)
            .filter(|&s| !self.segments[s].load(Ordering::Acquire).is_null())
            .flat_map(move |s| {
                let base = (segment_len(s) - FIRST_SEGMENT) as u64;
                (0..segment_len(s) as u64).filter_map(move |o| {
                    let index = base + o;
                    self.get(index).map(|v| (index, v))
                })
            })
    }
}

impl<T> Drop for ThreadData<T> {
    fn drop(&mut self) {
        for (segment, slots) in self.segments.iter_mut().enumerate() {
            let slots = *slots.get_mut();
            if slots.is_null() {
                continue;
            }
            let len = segment_len(segment);
            // SAFETY: `slots` is a published boxed slice of `len` atomics and
            // we have exclusive access (`&mut self`).
            let boxed = unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(slots, len)) };
            for slot in boxed.iter() {
                let value = slot.load(Ordering::Acquire);
                if !value.is_null() {
                    // SAFETY: each non-null slot owns a leaked Box<T>.
                    drop(unsafe { Box::from_raw(value) });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn locate_covers_indices_without_gaps() {
        assert_eq!(locate(0), Some((0, 0)));
        assert_eq!(locate(63), Some((0, 63)));
        assert_eq!(locate(64), Some((1, 0)));
        assert_eq!(locate(191), Some((1, 127)));
        assert_eq!(locate(192), Some((2, 0)));
        let mut expected = (0, 0);
        for i in 0..100_000u64 {
            let got = locate(i).unwrap();
            assert_eq!(got, expected, "index {i}");
            expected.1 += 1;
            if expected.1 == segment_len(expected.0) {
                expected = (expected.0 + 1, 0);
            }
        }
        assert_eq!(locate(u64::MAX), None);
    }

    #[test]
    fn sparse_inserts_and_iteration() {
        let map = ThreadData::new();
        for i in [0u64, 5, 63, 64, 1000, 70_000] {
            assert_eq!(*map.get_or_insert_with(i, || i * 2), i * 2);
        }
        assert_eq!(*map.get_or_insert_with(5, || 999), 10, "first value stays");
        assert!(map.get(6).is_none());
        let all: Vec<(u64, u64)> = map.iter().map(|(i, v)| (i, *v)).collect();
        assert_eq!(
            all,
            vec![
                (0, 0),
                (5, 10),
                (63, 126),
                (64, 128),
                (1000, 2000),
                (70_000, 140_000)
            ]
        );
    }

    #[test]
    fn concurrent_racing_inserts_keep_one_value_and_drop_the_rest() {
        let map = Arc::new(ThreadData::<Arc<u64>>::new());
        let witness = Arc::new(0u64);
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let map = map.clone();
                let witness = witness.clone();
                std::thread::spawn(move || {
                    for i in 0..2_000u64 {
                        map.get_or_insert_with(i, || witness.clone());
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(map.iter().count(), 2_000);
        // Losers were dropped: only the 2000 stored clones (+1) remain.
        assert_eq!(Arc::strong_count(&witness), 2_001);
        drop(Arc::try_unwrap(map).ok().unwrap());
        assert_eq!(Arc::strong_count(&witness), 1);
    }
}
