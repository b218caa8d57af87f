//! An append-only hash index: maps a 64-bit hash plus an equality check to a
//! dense `u32` index into a registry owned by the caller (string table,
//! payload registry).
//!
//! Readers take no lock, no guard and no fence beyond acquire loads: the
//! table is open-addressed, entries are never removed, and growth publishes
//! a new table behind an `AtomicPtr` while the old one is retired (freed only
//! on drop). A reader racing a growth may miss an entry inserted meanwhile;
//! callers therefore re-check under their insertion lock before inserting.
//! Writers must be serialised by the caller. This module must never free a
//! table a reader may still hold.

use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

struct Slots {
    mask: usize,
    /// 0 = empty, else `(hash as u32) << 32 | (index + 1)`: the low 32 bits
    /// of the hash place the entry and also serve as its tag, so growth
    /// re-places entries without touching the registry they index.
    slots: Box<[AtomicU64]>,
}

impl Slots {
    fn with_capacity(cap: usize) -> Box<Slots> {
        debug_assert!(cap.is_power_of_two());
        Box::new(Slots {
            mask: cap - 1,
            slots: (0..cap).map(|_| AtomicU64::new(0)).collect(),
        })
    }

    fn place(&self, hash: u32, index: u32) {
        let v = ((hash as u64) << 32) | (index as u64 + 1);
        let mut i = hash as usize & self.mask;
        loop {
            if self.slots[i].load(Ordering::Relaxed) == 0 {
                self.slots[i].store(v, Ordering::Release);
                return;
            }
            i = (i + 1) & self.mask;
        }
    }
}

/// The index. See the module documentation for the concurrency contract.
pub(crate) struct IndexTable {
    current: AtomicPtr<Slots>,
    len: AtomicUsize,
    retired: Mutex<Vec<*mut Slots>>,
}

// SAFETY: the raw pointers are owned boxes; readers only read atomics through
// them, and frees happen in Drop with exclusive access.
unsafe impl Send for IndexTable {}
// SAFETY: as above.
unsafe impl Sync for IndexTable {}

impl IndexTable {
    pub(crate) fn new() -> Self {
        IndexTable {
            current: AtomicPtr::new(Box::into_raw(Slots::with_capacity(64))),
            len: AtomicUsize::new(0),
            retired: Mutex::new(Vec::new()),
        }
    }

    /// The index whose entry has this hash and satisfies `eq`.
    #[inline]
    pub(crate) fn find(&self, hash: u64, mut eq: impl FnMut(u32) -> bool) -> Option<u32> {
        // SAFETY: a published table is freed only in Drop.
        let t = unsafe { &*self.current.load(Ordering::Acquire) };
        let tag = hash as u32 as u64;
        let mut i = hash as u32 as usize & t.mask;
        loop {
            let v = t.slots[i].load(Ordering::Acquire);
            if v == 0 {
                return None;
            }
            if v >> 32 == tag {
                let index = (v as u32).wrapping_sub(1);
                if eq(index) {
                    return Some(index);
                }
            }
            i = (i + 1) & t.mask;
        }
    }

    /// Adds `index` under `hash`. The caller serialises inserts and
    /// guarantees the key is not present.
    pub(crate) fn insert(&self, hash: u64, index: u32) {
        let len = self.len.load(Ordering::Relaxed) + 1;
        let cur = self.current.load(Ordering::Acquire);
        // SAFETY: published table, freed only in Drop.
        let t = unsafe { &*cur };
        if len * 4 > (t.mask + 1) * 3 {
            let bigger = Slots::with_capacity((t.mask + 1) * 2);
            for s in t.slots.iter() {
                let v = s.load(Ordering::Relaxed);
                if v != 0 {
                    bigger.place((v >> 32) as u32, (v as u32) - 1);
                }
            }
            bigger.place(hash as u32, index);
            self.current.store(Box::into_raw(bigger), Ordering::Release);
            self.retired
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(cur);
        } else {
            t.place(hash as u32, index);
        }
        self.len.store(len, Ordering::Relaxed);
    }
}

impl Drop for IndexTable {
    fn drop(&mut self) {
        // SAFETY: exclusive access; every pointer came from Box::into_raw.
        unsafe {
            drop(Box::from_raw(*self.current.get_mut()));
            for p in self
                .retired
                .get_mut()
                .unwrap_or_else(|e| e.into_inner())
                .drain(..)
            {
                drop(Box::from_raw(p));
            }
        }
    }
}

/// Byte-slice equality without a `memcmp` call for the short strings
/// payloads hold (pointer-equal slices short-circuit).
#[inline]
pub(crate) fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    if a.as_ptr() == b.as_ptr() {
        return true;
    }
    let mut ca = a.chunks_exact(8);
    let mut cb = b.chunks_exact(8);
    for (x, y) in (&mut ca).zip(&mut cb) {
        if u64::from_ne_bytes(x.try_into().expect("8 bytes"))
            != u64::from_ne_bytes(y.try_into().expect("8 bytes"))
        {
            return false;
        }
    }
    let (ra, rb) = (ca.remainder(), cb.remainder());
    let mut x = 0u64;
    let mut y = 0u64;
    for k in 0..ra.len() {
        x |= (ra[k] as u64) << (8 * k);
        y |= (rb[k] as u64) << (8 * k);
    }
    x == y
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_and_finds_everything() {
        let t = IndexTable::new();
        let h = |i: u32| (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        for i in 0..10_000u32 {
            assert_eq!(t.find(h(i), |j| j == i), None);
            t.insert(h(i), i);
        }
        for i in 0..10_000u32 {
            assert_eq!(t.find(h(i), |j| j == i), Some(i));
        }
        // Colliding hashes are told apart by `eq`.
        let t = IndexTable::new();
        t.insert(42, 0);
        t.insert(42, 1);
        assert_eq!(t.find(42, |j| j == 1), Some(1));
        assert_eq!(t.find(42, |j| j == 5), None);
    }
}
