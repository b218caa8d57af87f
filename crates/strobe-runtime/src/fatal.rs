//! Fatal and terminating signals: save what was collected, then let the
//! program die the way it would have died.
//!
//! Owns handlers for SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT and, when the
//! program left them at their default, SIGINT, SIGTERM, SIGHUP, SIGQUIT.
//! **Signal handler code**: [`on_fatal`] asks the recorder for an
//! emergency flush through async-signal-safe calls only (`write`, `poll`,
//! bounded in time), puts the previous disposition back and re-raises.

use std::sync::atomic::{AtomicBool, Ordering};

const FATAL: [libc::c_int; 5] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGILL,
    libc::SIGFPE,
    libc::SIGABRT,
];
const TERMINATING: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

static HANDLING: AtomicBool = AtomicBool::new(false);

/// Installs the handlers where the disposition is still the default (a
/// program's own handler is left alone). Stage 2 of start-up.
pub fn install() {
    for signal in FATAL.into_iter().chain(TERMINATING) {
        // SAFETY: sigaction is plain old data.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: querying the current action.
        if unsafe { libc::sigaction(signal, std::ptr::null(), &mut old) } != 0
            || old.sa_sigaction != libc::SIG_DFL
        {
            continue;
        }
        // SAFETY: as above.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_fatal as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_RESETHAND | libc::SA_NODEFER;
        // SAFETY: valid mask pointer.
        unsafe { libc::sigemptyset(&mut action.sa_mask) };
        // SAFETY: installing a valid SA_SIGINFO handler.
        unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) };
    }
}

/// **Signal handler.** Flushes once, then re-delivers the signal with the
/// disposition the program had (the default: terminate, maybe dump core).
extern "C" fn on_fatal(signal: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    if !HANDLING.swap(true, Ordering::SeqCst) {
        crate::recorder::emergency_flush();
    }
    // SA_RESETHAND already restored SIG_DFL; a synchronous fault
    // (si_code > 0: sent by the kernel for the faulting instruction) comes
    // back as soon as we return, anything else is raised again.
    // SAFETY: reading si_code of the siginfo the kernel passed.
    let from_fault = unsafe { (*info).si_code } > 0 && FATAL[..4].contains(&signal);
    if !from_fault {
        // SAFETY: raise is async-signal-safe; the signal is not blocked
        // (SA_NODEFER) and its action is the default again.
        unsafe { libc::raise(signal) };
    }
}
