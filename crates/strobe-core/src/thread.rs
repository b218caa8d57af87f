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
//! Owns the counters, the calling thread's identity and its kernel thread
//! id ([`gettid`], which the other crates call instead of caching the tid
//! themselves: one cache, one place that keeps it right after `fork`).
//! Reading the identity ([`current`]) and the tid ([`gettid`]) is
//! async-signal-safe (const-initialised thread-locals without destructors,
//! atomics, system calls); registering is not, and must happen at thread
//! start.
//!
//! # The cached tid and `fork`
//!
//! [`gettid`] caches the tid per thread, so the hot path is a thread-local
//! read instead of a system call. A child of `fork()` runs the forking
//! thread with the parent's memory, so it would inherit that cache, and
//! report the parent's tid. The cache is therefore forgotten in the child:
//!
//! * A `pthread_atfork` child handler, registered once when the library is
//!   loaded (an `.init_array` constructor; [`register_current`] registers it
//!   too, should the constructor not have run), calls
//!   [`refresh_after_fork`] in the child. The child has only the forking
//!   thread, and the handler runs on it, so clearing that thread's cache is
//!   enough. The handler only writes thread-locals and atomics and calls
//!   `getpid`/`gettid`: async-signal-safe, as a child of a multithreaded
//!   `fork` requires. Until the handler is registered, [`gettid`] does not
//!   cache (every call is the system call).
//! * Comparing a cached pid with `getpid()` on every call was rejected:
//!   glibc's `getpid` is a system call too (no pid cache since 2.25), which
//!   would cost as much as not caching at all.
//! * The cache is filled only when `getpid()` still matches the pid the
//!   library last saw (load time, or the last fork handler): a `vfork`
//!   child shares its parent's memory and thread-locals, so it must never
//!   store its tid into its parent thread's cache. (A `vfork` child reads a
//!   cache its parent thread already filled, so it sees the parent's tid.)
//! * Forks that bypass `pthread_atfork` handlers (a raw `fork`/`clone`
//!   system call, glibc's `_Fork`) keep the stale cache until the child
//!   calls [`refresh_after_fork`] itself. A signal handler that runs in a
//!   child between `fork` returning and the child handler running also sees
//!   the parent's tid (timers, and so sampling signals, are not inherited).

use crate::thread_data::ThreadData;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::Once;

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

thread_local! {
    /// The calling thread's kernel tid once looked up; 0 (never a tid):
    /// not yet, or forgotten after `fork`.
    static TID: Cell<i32> = const { Cell::new(0) };
}

/// Whether the `pthread_atfork` child handler is registered: only then may
/// [`gettid`] cache.
static FORK_HANDLER: AtomicBool = AtomicBool::new(false);

/// The pid of the process the caches belong to (set with the handler,
/// updated by [`refresh_after_fork`]); a `vfork` child sees its parent's.
static CACHE_PID: AtomicI32 = AtomicI32::new(0);

/// Registers the fork handler when the library is loaded, before any
/// thread of the program can ask for its tid.
#[used]
#[link_section = ".init_array"]
static REGISTER_FORK_HANDLER_AT_LOAD: extern "C" fn() = register_fork_handler_at_load;

extern "C" fn register_fork_handler_at_load() {
    #[cfg(test)]
    tests::RAN_AT_LOAD.store(true, Ordering::Relaxed);
    register_fork_handler();
}

/// The `pthread_atfork` child handler.
extern "C" fn forget_tid_in_child() {
    refresh_after_fork();
}

/// Registers [`forget_tid_in_child`] once. Not async-signal-safe
/// (`pthread_atfork` locks and allocates).
fn register_fork_handler() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: getpid has no preconditions and cannot fail.
        CACHE_PID.store(unsafe { libc::getpid() }, Ordering::Relaxed);
        // SAFETY: registers a child handler that lives as long as the
        // library (a static function) and is async-signal-safe.
        let rc = unsafe { libc::pthread_atfork(None, None, Some(forget_tid_in_child)) };
        // Release: a thread that sees `true` forks after the registration,
        // so its forks run the handler.
        FORK_HANDLER.store(rc == 0, Ordering::Release);
    });
}

/// The `gettid` system call.
#[inline]
fn gettid_syscall() -> i32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() }
}

/// The kernel thread id of the calling thread, also in a forked child
/// (see the module documentation). Async-signal-safe, never allocates;
/// after a thread's first call, a thread-local read.
#[inline]
pub fn gettid() -> i32 {
    if !FORK_HANDLER.load(Ordering::Acquire) {
        return gettid_syscall();
    }
    TID.try_with(|cell| {
        let cached = cell.get();
        if cached != 0 {
            return cached;
        }
        let tid = gettid_syscall();
        // SAFETY: getpid has no preconditions and cannot fail.
        if unsafe { libc::getpid() } == CACHE_PID.load(Ordering::Relaxed) {
            cell.set(tid);
        }
        tid
    })
    .unwrap_or_else(|_| gettid_syscall())
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
    register_fork_handler();
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

/// Makes the calling thread's tid right after `fork()`: forgets its cached
/// tid, and its identity keeps its ids but gets the child's kernel tid.
/// Runs by itself in the child of every `fork()` that runs
/// `pthread_atfork` handlers; call it after forks that do not (a raw
/// system call). Harmless elsewhere, except in a `vfork` child (which
/// shares its parent's memory): never call it there. Async-signal-safe.
pub fn refresh_after_fork() {
    let _ = TID.try_with(|cell| cell.set(0));
    // SAFETY: getpid has no preconditions and cannot fail.
    CACHE_PID.store(unsafe { libc::getpid() }, Ordering::Relaxed);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Set by the load-time constructor.
    pub(super) static RAN_AT_LOAD: AtomicBool = AtomicBool::new(false);

    #[test]
    fn the_fork_handler_is_registered_at_load_and_the_tid_is_cached() {
        assert!(RAN_AT_LOAD.load(Ordering::Relaxed), "constructor ran");
        assert!(FORK_HANDLER.load(Ordering::Acquire));
        let tid = std::thread::spawn(|| {
            let tid = gettid();
            assert_eq!(tid, gettid_syscall());
            assert_eq!(TID.with(Cell::get), tid, "cached after the first call");
            tid
        })
        .join()
        .unwrap();
        assert_ne!(tid, gettid());
    }

    extern "C" fn vfork_child(_: *mut libc::c_void) -> libc::c_int {
        // Shares the parent's memory and thread pointer: this must not
        // fill the parent thread's cache with the child's tid.
        let _ = gettid();
        // SAFETY: _exit is async-signal-safe and never returns.
        unsafe { libc::_exit(0) }
    }

    #[test]
    fn a_vfork_child_does_not_fill_its_parent_threads_cache() {
        std::thread::spawn(|| {
            assert_eq!(TID.with(Cell::get), 0, "a fresh thread has no tid cached");
            let mut stack = vec![0u8; 256 * 1024];
            // SAFETY: one past the end of `stack`, aligned down to 16 (stacks
            // grow down on Linux's architectures).
            let top = unsafe { stack.as_mut_ptr().add(stack.len()) };
            let top = top.wrapping_sub(top as usize % 16);
            // SAFETY: like vfork(): the child runs `vfork_child` on `stack`
            // (which outlives it: CLONE_VFORK suspends this thread until the
            // child exits) and only calls gettid and _exit.
            let pid = unsafe {
                libc::clone(
                    vfork_child,
                    top.cast(),
                    libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                    std::ptr::null_mut(),
                )
            };
            assert!(pid > 0, "clone failed");
            let mut status = 0;
            // SAFETY: waiting for our own child; `status` is a valid pointer.
            assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
            assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
            assert_eq!(TID.with(Cell::get), 0, "the child filled our cache");
            assert_eq!(gettid(), gettid_syscall());
        })
        .join()
        .unwrap();
    }

    /// In a forked child: (gettid(), the system call, the identity's tid).
    fn child_view() -> [i32; 3] {
        [gettid(), gettid_syscall(), current().map_or(0, |id| id.tid)]
    }

    #[test]
    fn a_forked_child_sees_its_own_tid() {
        // On a thread of its own, so registering it leaves the harness's
        // threads alone.
        std::thread::spawn(|| {
            let parent = register_current(ThreadRole::Program).tid;
            assert_eq!(gettid(), parent);
            let mut fds = [0; 2];
            // SAFETY: `fds` has room for the two descriptors pipe writes.
            assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
            // SAFETY: the child only reads thread-locals, makes system
            // calls and leaves with `_exit`, never returning into the test
            // harness (whose other threads do not exist in the child).
            let pid = unsafe { libc::fork() };
            assert!(pid >= 0, "fork failed");
            if pid == 0 {
                let view = child_view();
                let mut msg = [0u8; 12];
                for (i, v) in view.iter().enumerate() {
                    msg[i * 4..i * 4 + 4].copy_from_slice(&v.to_ne_bytes());
                }
                // SAFETY: `msg` is 12 readable bytes; write and _exit are
                // async-signal-safe.
                unsafe {
                    let written = libc::write(fds[1], msg.as_ptr().cast(), msg.len());
                    libc::_exit(if written == 12 { 0 } else { 1 });
                }
            }
            let mut msg = [0u8; 12];
            // SAFETY: closing the write end; reading at most 12 bytes into
            // `msg` (a pipe delivers a write this small whole).
            let got = unsafe {
                libc::close(fds[1]);
                libc::read(fds[0], msg.as_mut_ptr().cast(), msg.len())
            };
            let mut status = 0;
            // SAFETY: closing the read end; waiting for our own child.
            unsafe {
                libc::close(fds[0]);
                assert_eq!(libc::waitpid(pid, &mut status, 0), pid);
            }
            assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
            assert_eq!(got, 12, "child sent no result");
            let v = |i: usize| i32::from_ne_bytes(msg[i * 4..i * 4 + 4].try_into().unwrap());
            let (cached, syscall, identity) = (v(0), v(1), v(2));
            assert_ne!(syscall, parent);
            assert_eq!(cached, syscall, "gettid() in the child");
            assert_eq!(identity, syscall, "current().tid in the child");
            // The parent's cache is untouched.
            assert_eq!(gettid(), parent);
        })
        .join()
        .unwrap();
    }
}
