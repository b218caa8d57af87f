//! Per-thread state of the XPTI API: the universal id and the stashed
//! (key, value) tuple (depth 1).
//!
//! Owns two thread-locals. It must never allocate or lock: these calls sit
//! on instrumentation paths.

use std::cell::Cell;
use std::ffi::CStr;

use crate::error::TraceError;

thread_local! {
    static UNIVERSAL_ID: Cell<u64> = const { Cell::new(0) };
    static STASH: Cell<Option<(&'static CStr, u64)>> = const { Cell::new(None) };
}

/// The calling thread's universal id (0 until set).
pub fn universal_id() -> u64 {
    UNIVERSAL_ID.with(Cell::get)
}

/// Sets the calling thread's universal id.
pub fn set_universal_id(id: u64) {
    UNIVERSAL_ID.with(|c| c.set(id));
}

/// Stashes (key, value) for the calling thread. `Duplicate` when a tuple is
/// already stashed (depth 1: unstash first).
pub fn stash_tuple(key: &'static CStr, value: u64) -> Result<(), TraceError> {
    STASH.with(|c| {
        if c.get().is_some() {
            return Err(TraceError::Duplicate(
                "a tuple is already stashed on this thread",
            ));
        }
        c.set(Some((key, value)));
        Ok(())
    })
}

/// The calling thread's stashed tuple; `NotFound` when none.
pub fn stashed_tuple() -> Result<(&'static CStr, u64), TraceError> {
    STASH.with(|c| {
        c.get()
            .ok_or(TraceError::NotFound("no tuple is stashed on this thread"))
    })
}

/// Drops the calling thread's stashed tuple (no-op when none).
pub fn unstash_tuple() {
    STASH.with(|c| c.set(None));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stash_depth_one_per_thread() {
        assert!(stashed_tuple().is_err());
        stash_tuple(c"k", 7).unwrap();
        assert_eq!(
            stash_tuple(c"x", 1),
            Err(TraceError::Duplicate(
                "a tuple is already stashed on this thread"
            ))
        );
        assert_eq!(stashed_tuple().unwrap(), (c"k", 7));
        std::thread::spawn(|| assert!(stashed_tuple().is_err()))
            .join()
            .unwrap();
        unstash_tuple();
        assert!(stashed_tuple().is_err());
        unstash_tuple();
        set_universal_id(42);
        assert_eq!(universal_id(), 42);
        std::thread::spawn(|| assert_eq!(universal_id(), 0))
            .join()
            .unwrap();
    }
}
