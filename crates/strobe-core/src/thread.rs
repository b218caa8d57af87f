//! Thread identity (seed 000): every thread gets two numbers.
//!
//! * The **internal id** counts every thread strobe sees, in registration
//!   order, starting at 0.
//! * The **sequent id** separates the program's threads from strobe's own:
//!   the program's threads get 0, 1, 2, … in creation order (so per-thread
//!   data of the program's threads sits close together and log messages
//!   number threads as the user thinks of them), strobe's threads get
//!   [`STROBE_SEQUENT_OFFSET`] + 0, 1, 2, …
//!
//! Owns the counters and the calling thread's identity. Reading the
//! identity ([`current`]) is async-signal-safe (a const-initialised
//! thread-local without destructor); registering is not, and must happen
//! at thread start.

use crate::thread_data::ThreadData;
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// Added to the sequent ids of threads strobe itself creates.
pub const STROBE_SEQUENT_OFFSET: u64 = 1_000_000;

/// Who created a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ThreadRole {
    /// The profiled program (or a library it uses).
    Program,
    /// strobe itself (writer, allocator, delivery threads).
    Strobe,
}

/// A thread's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadIdentity {
    /// Process-wide registration order.
    pub internal: u64,
    /// Dense per role; strobe's threads offset by [`STROBE_SEQUENT_OFFSET`].
    pub sequent: u64,
    /// Who created the thread.
    pub role: ThreadRole,
    /// The kernel thread id.
    pub tid: i32,
}

static NEXT_INTERNAL: AtomicU64 = AtomicU64::new(0);
static NEXT_PROGRAM: AtomicU64 = AtomicU64::new(0);
static NEXT_STROBE: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static CURRENT: Cell<Option<ThreadIdentity>> = const { Cell::new(None) };
}

/// The kernel thread id of the calling thread. Async-signal-safe.
#[inline]
pub fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() }
}

/// The calling thread's identity, if it registered. Async-signal-safe.
#[inline]
pub fn current() -> Option<ThreadIdentity> {
    CURRENT.try_with(Cell::get).ok().flatten()
}

/// Registers the calling thread (once; later calls return the first
/// identity, whatever role they pass). Not async-signal-safe.
pub fn register_current(role: ThreadRole) -> ThreadIdentity {
    if let Some(id) = current() {
        return id;
    }
    let sequent = match role {
        ThreadRole::Program => NEXT_PROGRAM.fetch_add(1, Ordering::Relaxed),
        ThreadRole::Strobe => STROBE_SEQUENT_OFFSET + NEXT_STROBE.fetch_add(1, Ordering::Relaxed),
    };
    let id = ThreadIdentity {
        internal: NEXT_INTERNAL.fetch_add(1, Ordering::Relaxed),
        sequent,
        role,
        tid: gettid(),
    };
    let _ = CURRENT.try_with(|c| c.set(Some(id)));
    id
}

/// Forgets the calling thread's identity after `fork()`: the child's only
/// thread keeps its ids but gets its new kernel tid.
pub fn refresh_after_fork() {
    let _ = CURRENT.try_with(|c| {
        if let Some(mut id) = c.get() {
            id.tid = gettid();
            c.set(Some(id));
        }
    });
}

/// Per-thread data addressed by sequent id, split so that the program's
/// threads (dense from 0) and strobe's threads (dense from the offset)
/// each use a compact [`ThreadData`].
pub struct PerThread<T> {
    program: ThreadData<T>,
    strobe: ThreadData<T>,
}

impl<T> Default for PerThread<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> PerThread<T> {
    /// An empty store; usable in a `static`.
    pub const fn new() -> PerThread<T> {
        PerThread {
            program: ThreadData::new(),
            strobe: ThreadData::new(),
        }
    }

    fn split(&self, sequent: u64) -> (&ThreadData<T>, u64) {
        match sequent.checked_sub(STROBE_SEQUENT_OFFSET) {
            Some(index) => (&self.strobe, index),
            None => (&self.program, sequent),
        }
    }

    /// The data of the thread with this sequent id. Async-signal-safe.
    #[inline]
    pub fn get(&self, sequent: u64) -> Option<&T> {
        let (map, index) = self.split(sequent);
        map.get(index)
    }

    /// The data of the thread with this sequent id, created if missing.
    /// Allocates: call at thread start, not in a signal handler.
    pub fn get_or_insert_with(&self, sequent: u64, make: impl FnOnce() -> T) -> &T {
        let (map, index) = self.split(sequent);
        map.get_or_insert_with(index, make)
    }

    /// Every (sequent id, data), the program's threads first.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &T)> + '_ {
        self.program.iter().chain(
            self.strobe
                .iter()
                .map(|(i, v)| (i + STROBE_SEQUENT_OFFSET, v)),
        )
    }
}
