//! The program's view of strobe's sampling signals.
//!
//! Interposes `sigaction`, `signal`, `bsd_signal` and `sysv_signal`: for a
//! sampling signal the program's request is recorded (and reported back)
//! instead of replacing strobe's handler, which delivers every signal that
//! is not from strobe's timers as the program asked
//! (`strobe_sampler::signals`). Every other signal passes straight
//! through, except that a handler the program installs for one of them
//! runs with the sampling signals blocked (`program_sigaction`).
//! Interposes `sigprocmask` and `pthread_sigmask` only to watch: a thread
//! that blocks a sampling signal is not sampled while it does, and its
//! slot says so for the collector to report. Never runs in a signal
//! handler except [`consume_pending_sampling_signals`]'s callers.

use crate::interpose::{real, RealFn};
use crate::state::Runtime;
use std::sync::atomic::Ordering;
use strobe_sampler::signals::{
    is_sampling_signal, mask_program_handler, program_action, program_sigaction, set_program_action,
};

static REAL_SIGNAL: RealFn = RealFn::new(c"signal");
static REAL_SYSV_SIGNAL: RealFn = RealFn::new(c"sysv_signal");
static REAL_SIGPROCMASK: RealFn = RealFn::new(c"sigprocmask");
static REAL_PTHREAD_SIGMASK: RealFn = RealFn::new(c"pthread_sigmask");

type Handler = libc::sighandler_t;

/// Interposes `sigaction`.
///
/// # Safety
/// Same contract as `sigaction`.
#[no_mangle]
pub unsafe extern "C" fn sigaction(
    signal: libc::c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> libc::c_int {
    if !is_sampling_signal(signal) {
        // SAFETY: forwarding the caller's arguments.
        return unsafe { program_sigaction(signal, act, old) };
    }
    if !old.is_null() {
        // SAFETY: the caller's out-pointer.
        unsafe { *old = program_action(signal) };
    }
    if !act.is_null() {
        // SAFETY: the caller's action.
        set_program_action(signal, unsafe { &*act });
    }
    0
}

/// Records a `signal()`-style disposition; returns the previous handler.
fn set_simple(signal: libc::c_int, handler: Handler, flags: libc::c_int) -> Handler {
    let previous = program_action(signal).sa_sigaction;
    // SAFETY: sigaction is plain old data.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = handler;
    action.sa_flags = flags;
    // SAFETY: a valid mask inside `action`.
    unsafe { libc::sigemptyset(&mut action.sa_mask) };
    set_program_action(signal, &action);
    previous
}

/// Interposes `signal` (BSD semantics, as glibc's: restart, not reset).
///
/// # Safety
/// Same contract as `signal`.
#[no_mangle]
pub unsafe extern "C" fn signal(signal: libc::c_int, handler: Handler) -> Handler {
    if is_sampling_signal(signal) {
        return set_simple(signal, handler, libc::SA_RESTART);
    }
    let real_signal = real!(REAL_SIGNAL as fn(libc::c_int, Handler) -> Handler);
    // SAFETY: forwarding the caller's arguments.
    let previous = unsafe { real_signal(signal, handler) };
    mask_program_handler(signal);
    previous
}

/// Interposes `bsd_signal` (the same as `signal`).
///
/// # Safety
/// Same contract as `signal`.
#[no_mangle]
pub unsafe extern "C" fn bsd_signal(sig: libc::c_int, handler: Handler) -> Handler {
    // SAFETY: same contract.
    unsafe { signal(sig, handler) }
}

/// Interposes `sysv_signal` (reset to default on delivery, not blocked).
///
/// # Safety
/// Same contract as `sysv_signal`.
#[no_mangle]
pub unsafe extern "C" fn sysv_signal(signal: libc::c_int, handler: Handler) -> Handler {
    if is_sampling_signal(signal) {
        return set_simple(signal, handler, libc::SA_RESETHAND | libc::SA_NODEFER);
    }
    let real_signal = real!(REAL_SYSV_SIGNAL as fn(libc::c_int, Handler) -> Handler);
    // SAFETY: forwarding the caller's arguments.
    let previous = unsafe { real_signal(signal, handler) };
    mask_program_handler(signal);
    previous
}

/// The calling thread's current signal mask (raw system call).
fn current_mask() -> u64 {
    let mut old = 0u64;
    // SAFETY: rt_sigprocmask querying into an 8-byte word.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_BLOCK,
            std::ptr::null::<u64>(),
            &mut old as *mut u64,
            8usize,
        )
    };
    old
}

/// Records in the calling thread's slot whether it blocks a sampling
/// signal now.
pub fn note_current_mask(rt: &Runtime, slot: u32) {
    let mask = current_mask();
    let blocked = rt
        .segment
        .header()
        .signals
        .iter()
        .map(|s| s.load(Ordering::Relaxed))
        .any(|s| s > 0 && mask & (1u64 << (s - 1)) != 0);
    let s = rt.segment.slot(slot);
    let since = s.blocked_since.load(Ordering::Relaxed);
    if blocked && since == 0 {
        s.blocked_since
            .store(strobe_core::clock::now_ns(), Ordering::Relaxed);
    } else if !blocked && since != 0 {
        let spent = strobe_core::clock::now_ns().saturating_sub(since);
        s.blocked_ns.fetch_add(spent, Ordering::Relaxed);
        s.blocked_since.store(0, Ordering::Relaxed);
    }
}

fn after_mask_change() {
    let _ = std::panic::catch_unwind(|| {
        if let Some(rt) = crate::state::owned() {
            if let Some(slot) = crate::events::my_slot(rt) {
                note_current_mask(rt, slot);
            }
        }
    });
}

/// Interposes `sigprocmask` (watches, never changes, what is asked).
///
/// # Safety
/// Same contract as `sigprocmask`.
#[no_mangle]
pub unsafe extern "C" fn sigprocmask(
    how: libc::c_int,
    set: *const libc::sigset_t,
    old: *mut libc::sigset_t,
) -> libc::c_int {
    let real_fn = real!(
        REAL_SIGPROCMASK
            as fn(libc::c_int, *const libc::sigset_t, *mut libc::sigset_t) -> libc::c_int
    );
    // SAFETY: forwarding the caller's arguments.
    let rc = unsafe { real_fn(how, set, old) };
    if rc == 0 && !set.is_null() {
        after_mask_change();
    }
    rc
}

/// Interposes `pthread_sigmask` (watches, never changes, what is asked).
///
/// # Safety
/// Same contract as `pthread_sigmask`.
#[no_mangle]
pub unsafe extern "C" fn pthread_sigmask(
    how: libc::c_int,
    set: *const libc::sigset_t,
    old: *mut libc::sigset_t,
) -> libc::c_int {
    let real_fn = real!(
        REAL_PTHREAD_SIGMASK
            as fn(libc::c_int, *const libc::sigset_t, *mut libc::sigset_t) -> libc::c_int
    );
    // SAFETY: forwarding the caller's arguments.
    let rc = unsafe { real_fn(how, set, old) };
    if rc == 0 && !set.is_null() {
        after_mask_change();
    }
    rc
}

/// Takes any of strobe's sampling signals still pending on the calling
/// thread (a timer that expired just before it was deleted), so that a new
/// image never receives one before its own handler exists. Before `exec`.
pub fn consume_pending_sampling_signals() {
    let Some(rt) = crate::state::owned() else {
        return;
    };
    let mut set = 0u64;
    for s in rt.segment.header().signals.iter() {
        let s = s.load(Ordering::Relaxed);
        if s > 0 {
            set |= 1u64 << (s - 1);
        }
    }
    if set == 0 {
        return;
    }
    let zero = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: rt_sigtimedwait with a valid 8-byte set, no siginfo wanted,
    // a zero timeout: it returns a pending signal of the set or EAGAIN.
    while unsafe {
        libc::syscall(
            libc::SYS_rt_sigtimedwait,
            &set as *const u64,
            std::ptr::null_mut::<libc::siginfo_t>(),
            &zero as *const libc::timespec,
            8usize,
        )
    } > 0
    {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::testing::small;

    /// Blocks (`how`) `signal` on the calling thread by the raw system call.
    fn mask(how: libc::c_int, signal: i32) {
        let set = 1u64 << (signal - 1);
        // SAFETY: rt_sigprocmask with an 8-byte mask; no old mask wanted.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_rt_sigprocmask,
                how,
                &set as *const u64,
                std::ptr::null_mut::<u64>(),
                8usize,
            )
        };
        assert_eq!(rc, 0);
    }

    #[test]
    fn a_thread_blocking_a_sampling_signal_is_noted_in_its_slot_until_it_unblocks() {
        let rt = small();
        let slot = rt.segment.claim_slot(1).unwrap();
        let s = rt.segment.slot(slot);
        let sampling = libc::SIGRTMAX() - 1;
        rt.segment.header().signals[1].store(sampling, Ordering::Relaxed);
        // Runs on a thread of its own: the mask is per thread.
        std::thread::scope(|scope| {
            scope.spawn(|| {
                note_current_mask(rt, slot);
                assert_eq!(s.blocked_since.load(Ordering::Relaxed), 0);
                // Another signal blocked: not strobe's business.
                mask(libc::SIG_BLOCK, libc::SIGUSR2);
                note_current_mask(rt, slot);
                assert_eq!(s.blocked_since.load(Ordering::Relaxed), 0);
                let before = strobe_core::clock::now_ns();
                mask(libc::SIG_BLOCK, sampling);
                note_current_mask(rt, slot);
                let since = s.blocked_since.load(Ordering::Relaxed);
                assert!(since >= before, "{since} < {before}");
                // Noted again while still blocked: the start stays.
                note_current_mask(rt, slot);
                assert_eq!(s.blocked_since.load(Ordering::Relaxed), since);
                mask(libc::SIG_UNBLOCK, sampling);
                note_current_mask(rt, slot);
                let after = strobe_core::clock::now_ns();
                assert_eq!(s.blocked_since.load(Ordering::Relaxed), 0);
                assert!(s.blocked_ns.load(Ordering::Relaxed) <= after - since);
            });
        });
    }
}
