//! A small, process-unique index for each thread that touches the service.
//!
//! Owns the mapping thread → index that selects a producer's shard in every
//! buffer. The index lives in a const-initialised thread-local without a
//! destructor, so reading it never allocates, never locks and is safe from a
//! signal handler once the thread has read it at least once. Indices are
//! never reused; they only pick shards (modulo the shard count).
//!
//! Never looks up or caches the kernel thread id itself: [`tid`] is
//! `strobe_core::thread::gettid`, which stays right in a forked child.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};

static NEXT_INDEX: AtomicU32 = AtomicU32::new(1);

thread_local! {
    static INDEX: Cell<u32> = const { Cell::new(0) };
}

/// This thread's index (≥ 1), assigned on first use.
#[inline]
pub(crate) fn current() -> u32 {
    INDEX.with(|cell| {
        let index = cell.get();
        if index != 0 {
            return index;
        }
        let mut index = NEXT_INDEX.fetch_add(1, Ordering::Relaxed);
        if index == 0 {
            // Wrapped after 2^32 threads: 0 is reserved for "unassigned".
            index = NEXT_INDEX.fetch_add(1, Ordering::Relaxed);
        }
        cell.set(index);
        index
    })
}

/// The calling thread's kernel thread id: `strobe_core::thread::gettid`
/// (cached per thread, forgotten in a forked child). Async-signal-safe.
#[inline]
pub fn tid() -> u32 {
    // Kernel thread ids are positive, so the cast keeps the value.
    strobe_core::thread::gettid() as u32
}
