//! Callback thread handles: the registry of callback threads, which one
//! the calling OS thread is, and waking one.
//!
//! Owns the handle type ([`CallbackThread`]), the registry and the
//! thread-local mark of the running callback thread. Waking
//! (`Thread::unpark`) and looking up never allocate or lock, so producers
//! may call them from the emplace slow path. Never starts a thread (the
//! threads and their loop are `delivery`'s).

use crate::error::{Error, Result};
use crate::registry::Registry;
use std::cell::Cell;
use std::sync::OnceLock;
use std::thread::Thread;

/// Most callback threads a process may create (the default one included).
pub const MAX_CALLBACK_THREADS: usize = 256;

pub(crate) struct CallbackThreadInner {
    pub(crate) id: u64,
    /// The OS thread, set once it is spawned.
    pub(crate) thread: OnceLock<Thread>,
}

static THREADS: Registry<CallbackThreadInner, MAX_CALLBACK_THREADS> = Registry::new();

thread_local! {
    static CURRENT: Cell<u64> = const { Cell::new(0) };
}

/// A handle to a callback thread (seed 001's `callback_thread_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallbackThread {
    pub(crate) id: u64,
}

impl CallbackThread {
    /// The thread's id (non-zero).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The callback thread with this id.
    pub fn from_id(id: u64) -> Result<CallbackThread> {
        lookup(id).map(|_| CallbackThread { id })
    }

    /// The id of the callback thread the caller runs on, if it is one.
    pub fn current() -> Option<CallbackThread> {
        match current_thread_id() {
            0 => None,
            id => Some(CallbackThread { id }),
        }
    }
}

/// Registers a new callback thread (its OS thread not started yet).
pub(crate) fn register() -> Result<&'static CallbackThreadInner> {
    let made = THREADS.insert_with(|id| {
        Ok::<_, Error>(CallbackThreadInner {
            id,
            thread: OnceLock::new(),
        })
    });
    match made {
        Some(Ok(inner)) => Ok(inner),
        Some(Err(e)) => Err(e),
        None => Err(Error::LimitReached {
            what: "callback threads",
            limit: MAX_CALLBACK_THREADS,
        }),
    }
}

pub(crate) fn lookup(id: u64) -> Result<&'static CallbackThreadInner> {
    THREADS.get(id).ok_or(Error::UnknownCallbackThread(id))
}

/// Marks the calling OS thread as callback thread `id` (first thing its
/// loop does).
pub(crate) fn mark_current(id: u64) {
    CURRENT.with(|c| c.set(id));
}

/// The id of the callback thread running on this OS thread (0 = none).
#[inline]
pub(crate) fn current_thread_id() -> u64 {
    CURRENT.with(|c| c.get())
}

/// Wakes callback thread `id`. Never allocates or locks.
#[inline]
pub(crate) fn wake(id: u64) {
    if let Some(inner) = THREADS.get(id) {
        if let Some(thread) = inner.thread.get() {
            thread.unpark();
        }
    }
}
