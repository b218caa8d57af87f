//! Process life-cycle wrappers: `fork`, the `exec` family, `_exit`.
//!
//! Owns what happens to the profile when the process forks (the child gets
//! its own runtime and database, or stops profiling, per `fork_mode`), when
//! it replaces its image (the profile is finished first; the new image is
//! profiled through the inherited environment), and when it leaves without
//! running `atexit` handlers. Never runs in a signal handler.

use crate::interpose::{real, RealFn};
use crate::state::{current, finalize};

use strobe_core::settings::Key;

static REAL_FORK: RealFn = RealFn::new(c"fork");
static REAL_EXECVE: RealFn = RealFn::new(c"execve");
static REAL_EXECV: RealFn = RealFn::new(c"execv");
static REAL_EXECVP: RealFn = RealFn::new(c"execvp");
static REAL_EXECVPE: RealFn = RealFn::new(c"execvpe");
static REAL_EXIT_NOW: RealFn = RealFn::new(c"_exit");
static REAL_EXIT_NOW_C99: RealFn = RealFn::new(c"_Exit");

type Argv = *const *const libc::c_char;

/// Interposes `fork`.
///
/// # Safety
/// Same contract as `fork`.
#[no_mangle]
pub unsafe extern "C" fn fork() -> libc::pid_t {
    let real_fork = real!(REAL_FORK as fn() -> libc::pid_t);
    let rt = crate::state::owned();
    let settings = rt.map(|rt| rt.settings.clone());
    let held = rt.map(|rt| rt.recorder.hold_for_fork());
    // SAFETY: plain fork.
    let pid = unsafe { real_fork() };
    if pid == 0 {
        // The parent's writer (and its lock) are abandoned here.
        std::mem::forget(held);
        let _ = std::panic::catch_unwind(|| after_fork_in_child(settings));
    } else {
        drop(held);
    }
    pid
}

fn after_fork_in_child(settings: Option<strobe_core::settings::Settings>) {
    strobe_core::thread::refresh_after_fork();
    strobe_sampler::snapshot::reset_after_fork();
    crate::state::abandon_after_fork();
    if let Some(settings) = settings {
        if settings.text(Key::ForkMode) == "follow" {
            crate::state::start(settings);
        }
    }
}

/// Finishes the profile before the image is replaced, and restarts it if
/// the exec failed.
fn around_exec(exec: impl FnOnce() -> libc::c_int) -> libc::c_int {
    // In a vfork child (subprocess launchers use it) the runtime is the
    // parent's: touch nothing, just exec.
    if crate::state::owned().is_none() {
        return exec();
    }
    let settings = current().map(|rt| rt.settings.clone());
    let _ = std::panic::catch_unwind(|| finalize("exec"));
    let rc = exec();
    // Only reached when the exec failed: profile on.
    let errno = std::io::Error::last_os_error();
    if let Some(settings) = settings {
        let _ = std::panic::catch_unwind(|| crate::state::start(settings));
    }
    if let Some(code) = errno.raw_os_error() {
        // SAFETY: restoring errno for the caller.
        unsafe { *libc::__errno_location() = code };
    }
    rc
}

/// Interposes `execve`.
///
/// # Safety
/// Same contract as `execve`.
#[no_mangle]
pub unsafe extern "C" fn execve(path: *const libc::c_char, argv: Argv, envp: Argv) -> libc::c_int {
    let real_exec = real!(REAL_EXECVE as fn(*const libc::c_char, Argv, Argv) -> libc::c_int);
    // SAFETY: forwarding the caller's arguments.
    around_exec(|| unsafe { real_exec(path, argv, envp) })
}

/// Interposes `execv`.
///
/// # Safety
/// Same contract as `execv`.
#[no_mangle]
pub unsafe extern "C" fn execv(path: *const libc::c_char, argv: Argv) -> libc::c_int {
    let real_exec = real!(REAL_EXECV as fn(*const libc::c_char, Argv) -> libc::c_int);
    // SAFETY: forwarding the caller's arguments.
    around_exec(|| unsafe { real_exec(path, argv) })
}

/// Interposes `execvp`.
///
/// # Safety
/// Same contract as `execvp`.
#[no_mangle]
pub unsafe extern "C" fn execvp(file: *const libc::c_char, argv: Argv) -> libc::c_int {
    let real_exec = real!(REAL_EXECVP as fn(*const libc::c_char, Argv) -> libc::c_int);
    // SAFETY: forwarding the caller's arguments.
    around_exec(|| unsafe { real_exec(file, argv) })
}

/// Interposes `execvpe`.
///
/// # Safety
/// Same contract as `execvpe`.
#[no_mangle]
pub unsafe extern "C" fn execvpe(file: *const libc::c_char, argv: Argv, envp: Argv) -> libc::c_int {
    let real_exec = real!(REAL_EXECVPE as fn(*const libc::c_char, Argv, Argv) -> libc::c_int);
    // SAFETY: forwarding the caller's arguments.
    around_exec(|| unsafe { real_exec(file, argv, envp) })
}

/// `_exit` skips `atexit`, and is often called from a signal handler or a
/// forked child: only the async-signal-safe, time-bounded emergency flush
/// runs (the collected data is committed; the end-of-run totals are not
/// written). Nothing at all in a vfork child.
fn save_before_exit_now() {
    if crate::state::owned().is_some() {
        crate::recorder::emergency_flush();
    }
}

/// Interposes `_exit`: `atexit` handlers do not run, so save here.
///
/// # Safety
/// Same contract as `_exit`.
#[no_mangle]
pub unsafe extern "C" fn _exit(status: libc::c_int) -> ! {
    save_before_exit_now();
    let real_exit = real!(REAL_EXIT_NOW as fn(libc::c_int) -> ());
    // SAFETY: plain _exit.
    unsafe { real_exit(status) };
    // SAFETY: _exit does not return; abort if it somehow did.
    unsafe { libc::abort() }
}

/// Interposes `_Exit` (the C99 spelling of `_exit`).
///
/// # Safety
/// Same contract as `_Exit`.
#[no_mangle]
pub unsafe extern "C" fn _Exit(status: libc::c_int) -> ! {
    save_before_exit_now();
    let real_exit = real!(REAL_EXIT_NOW_C99 as fn(libc::c_int) -> ());
    // SAFETY: plain _Exit.
    unsafe { real_exit(status) };
    // SAFETY: _Exit does not return; abort if it somehow did.
    unsafe { libc::abort() }
}

extern "C" {
    fn strobe_execl();
    fn strobe_execlp();
    fn strobe_execle();
}

/// Interposes `execl`: a naked jump to the C implementation in
/// `csrc/exec_variadic.c`, which gathers the variadic arguments and calls
/// the interposed `execv`. The caller's registers and stack pass through
/// untouched, as a variadic call needs.
#[no_mangle]
#[unsafe(naked)]
pub extern "C" fn execl() {
    std::arch::naked_asm!("jmp {}", sym strobe_execl)
}

/// Interposes `execlp` (see [`execl`]).
#[no_mangle]
#[unsafe(naked)]
pub extern "C" fn execlp() {
    std::arch::naked_asm!("jmp {}", sym strobe_execlp)
}

/// Interposes `execle` (see [`execl`]).
#[no_mangle]
#[unsafe(naked)]
pub extern "C" fn execle() {
    std::arch::naked_asm!("jmp {}", sym strobe_execle)
}
