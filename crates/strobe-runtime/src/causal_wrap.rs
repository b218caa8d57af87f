//! The blocking and waking calls interposed for causal profiling: mutexes,
//! read-write locks, condition variables, joins, barriers, semaphores and
//! sleeps. Each forwards to the real function unchanged; in a causal run it
//! applies the delay rules of [`crate::causal`] around the call (a waker,
//! and a thread about to wait, pays what it owes first; a thread woken by
//! another is credited the delay inserted while it waited; a thread back
//! from a timeout pays).
//!
//! Owns these wrappers only. Outside a causal run each costs one relaxed
//! load and an indirect call. Never changes arguments, results or `errno`
//! (the rules touch no `errno`-setting call). Locks taken through raw
//! `futex` calls (Rust's `std::sync`, Go) are not seen: their delays are
//! paid at the thread's next sample instead.

use crate::causal::{after_blocking, before_blocking, before_waking};
use crate::interpose::{real, RealFn};
use libc::{c_int, c_uint, c_void, pthread_cond_t, pthread_mutex_t, timespec};

/// The `errno` of the real call survives the rules around it.
fn keeping_errno<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: the calling thread's errno location is always valid.
    let saved = unsafe { *libc::__errno_location() };
    let out = f();
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
    out
}

/// Defines an interposed function whose real call `$body` is preceded by
/// `$pre` and followed by `$post(result)`.
macro_rules! wrap {
    ($name:ident, $real:ident, fn($($arg:ident: $ty:ty),*) -> $ret:ty,
     pre: $pre:expr, post: |$result:ident| $post:expr) => {
        static $real: RealFn = RealFn::new({
            // SAFETY: a NUL-terminated literal.
            unsafe { std::ffi::CStr::from_bytes_with_nul_unchecked(concat!(stringify!($name), "\0").as_bytes()) }
        });

        /// Interposed for causal profiling; see the module documentation.
        ///
        /// # Safety
        /// The real function's contract.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            let real_fn = real!($real as fn($($ty),*) -> $ret);
            if !crate::causal::on() {
                // SAFETY: forwarding the caller's arguments unchanged.
                return unsafe { real_fn($($arg),*) };
            }
            $pre;
            // SAFETY: forwarding the caller's arguments unchanged.
            let $result = unsafe { real_fn($($arg),*) };
            keeping_errno(|| $post);
            $result
        }
    };
}

wrap!(pthread_mutex_lock, REAL_MUTEX_LOCK, fn(m: *mut pthread_mutex_t) -> c_int,
    pre: before_blocking(), post: |rc| after_blocking(rc == 0));
wrap!(pthread_mutex_unlock, REAL_MUTEX_UNLOCK, fn(m: *mut pthread_mutex_t) -> c_int,
    pre: before_waking(), post: |_rc| ());
wrap!(pthread_rwlock_rdlock, REAL_RWLOCK_RDLOCK, fn(l: *mut libc::pthread_rwlock_t) -> c_int,
    pre: before_blocking(), post: |rc| after_blocking(rc == 0));
wrap!(pthread_rwlock_wrlock, REAL_RWLOCK_WRLOCK, fn(l: *mut libc::pthread_rwlock_t) -> c_int,
    pre: before_blocking(), post: |rc| after_blocking(rc == 0));
wrap!(pthread_rwlock_unlock, REAL_RWLOCK_UNLOCK, fn(l: *mut libc::pthread_rwlock_t) -> c_int,
    pre: before_waking(), post: |_rc| ());
wrap!(pthread_cond_wait, REAL_COND_WAIT,
    fn(c: *mut pthread_cond_t, m: *mut pthread_mutex_t) -> c_int,
    pre: before_blocking(), post: |rc| after_blocking(rc == 0));
wrap!(pthread_cond_timedwait, REAL_COND_TIMEDWAIT,
    fn(c: *mut pthread_cond_t, m: *mut pthread_mutex_t, t: *const timespec) -> c_int,
    pre: before_blocking(), post: |rc| after_blocking(rc == 0));
wrap!(pthread_cond_signal, REAL_COND_SIGNAL, fn(c: *mut pthread_cond_t) -> c_int,
    pre: before_waking(), post: |_rc| ());
wrap!(pthread_cond_broadcast, REAL_COND_BROADCAST, fn(c: *mut pthread_cond_t) -> c_int,
    pre: before_waking(), post: |_rc| ());
wrap!(pthread_join, REAL_JOIN, fn(t: libc::pthread_t, r: *mut *mut c_void) -> c_int,
    pre: before_blocking(), post: |rc| after_blocking(rc == 0));
wrap!(pthread_barrier_wait, REAL_BARRIER_WAIT, fn(b: *mut libc::pthread_barrier_t) -> c_int,
    pre: before_blocking(), post: |_rc| after_blocking(true));
wrap!(sem_wait, REAL_SEM_WAIT, fn(s: *mut libc::sem_t) -> c_int,
    pre: before_blocking(), post: |rc| after_blocking(rc == 0));
wrap!(sem_timedwait, REAL_SEM_TIMEDWAIT, fn(s: *mut libc::sem_t, t: *const timespec) -> c_int,
    pre: before_blocking(), post: |rc| after_blocking(rc == 0));
wrap!(sem_post, REAL_SEM_POST, fn(s: *mut libc::sem_t) -> c_int,
    pre: before_waking(), post: |_rc| ());
wrap!(nanosleep, REAL_NANOSLEEP, fn(req: *const timespec, rem: *mut timespec) -> c_int,
    pre: before_blocking(), post: |_rc| after_blocking(false));
wrap!(clock_nanosleep, REAL_CLOCK_NANOSLEEP,
    fn(clock: libc::clockid_t, flags: c_int, req: *const timespec, rem: *mut timespec) -> c_int,
    pre: before_blocking(), post: |_rc| after_blocking(false));
wrap!(usleep, REAL_USLEEP, fn(us: libc::useconds_t) -> c_int,
    pre: before_blocking(), post: |_rc| after_blocking(false));
wrap!(sleep, REAL_SLEEP, fn(s: c_uint) -> c_uint,
    pre: before_blocking(), post: |_rc| after_blocking(false));
