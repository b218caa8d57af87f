//! Process life-cycle wrappers: `fork` and the `exec` family.
//!
//! Owns what happens to the profile when the process forks (the child gets
//! a segment of its own, or stops profiling, per `fork_mode`) and when it
//! replaces its image (the segment is marked, timers deleted and any of
//! strobe's signals still pending on this thread consumed, so the new
//! image never meets one; the note says why the new image will not be
//! profiled when that can be seen from here). `_exit` needs no wrapper:
//! everything collected is already in shared memory. Never runs in a
//! signal handler.

use crate::interpose::{real, RealFn};
use std::ffi::CStr;
use strobe_core::shm::config::{COLLECTOR_ENV, CONFIG_ENV};
use strobe_core::shm::segment::exec_reason;

static REAL_FORK: RealFn = RealFn::new(c"fork");
static REAL_EXECVE: RealFn = RealFn::new(c"execve");
static REAL_EXECV: RealFn = RealFn::new(c"execv");
static REAL_EXECVP: RealFn = RealFn::new(c"execvp");
static REAL_EXECVPE: RealFn = RealFn::new(c"execvpe");

type Argv = *const *const libc::c_char;

extern "C" {
    static environ: *const *const libc::c_char;
}

/// Interposes `fork`.
///
/// # Safety
/// Same contract as `fork`.
#[no_mangle]
pub unsafe extern "C" fn fork() -> libc::pid_t {
    let real_fork = real!(REAL_FORK as fn() -> libc::pid_t);
    let parent = crate::state::owned();
    // SAFETY: plain fork.
    let pid = unsafe { real_fork() };
    if pid == 0 {
        if let Some(parent) = parent {
            let _ = std::panic::catch_unwind(|| after_fork_in_child(parent));
        }
    }
    pid
}

fn after_fork_in_child(parent: &'static crate::state::Runtime) {
    strobe_core::thread::refresh_after_fork();
    strobe_sampler::snapshot::reset_after_fork();
    crate::state::abandon_after_fork(parent);
    crate::events::clear_my_slot();
    if parent.config.fork_follow {
        crate::start::start_child(parent.config.clone());
    }
}

/// The arguments of this process, from `/proc/self/cmdline`.
pub fn own_arguments() -> Vec<Vec<u8>> {
    std::fs::read("/proc/self/cmdline")
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|a| !a.is_empty())
                .map(<[u8]>::to_vec)
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `envp` still carries strobe: the collector's address, the
/// configuration and the runtime in `LD_PRELOAD`.
fn environment_carries_strobe(envp: Argv) -> bool {
    if envp.is_null() {
        return false;
    }
    let mut found = [false; 3];
    let mut i = 0;
    loop {
        // SAFETY: envp is a NULL-terminated array of C strings.
        let p = unsafe { *envp.add(i) };
        if p.is_null() {
            break;
        }
        // SAFETY: each entry is NUL-terminated.
        let entry = unsafe { CStr::from_ptr(p) }.to_bytes();
        let starts =
            |name: &str| entry.starts_with(name.as_bytes()) && entry.get(name.len()) == Some(&b'=');
        if starts(COLLECTOR_ENV) {
            found[0] = true;
        } else if starts(CONFIG_ENV) {
            found[1] = true;
        } else if starts("LD_PRELOAD") && entry.windows(14).any(|w| w == b"strobe_runtime") {
            found[2] = true;
        }
        i += 1;
    }
    found.iter().all(|&f| f)
}

/// Prepares for the image to be replaced, runs `exec`, and undoes the
/// preparation if it failed.
fn around_exec(
    file: *const libc::c_char,
    envp: Argv,
    exec: impl FnOnce() -> libc::c_int,
) -> libc::c_int {
    let target_and_reason = || {
        let target = if file.is_null() {
            Vec::new()
        } else {
            // SAFETY: exec's file argument is NUL-terminated.
            strobe_core::shm::image::resolve_command(unsafe { CStr::from_ptr(file) }.to_bytes())
        };
        let reason = if environment_carries_strobe(envp) {
            strobe_core::shm::image::exec_reason_for(&target)
        } else {
            exec_reason::ENVIRONMENT
        };
        (target, reason)
    };
    // In a vfork child (subprocess launchers use it) the runtime is the
    // parent's: its state is left alone; only when the new image will not
    // be profiled, the parent's suspended thread's ring says so.
    let Some(rt) = crate::state::owned() else {
        let _ = std::panic::catch_unwind(|| note_vfork_child_exec(target_and_reason));
        return exec();
    };
    let _ = std::panic::catch_unwind(|| {
        let (target, reason) = target_and_reason();
        rt.segment.note_exec(&target, reason);
        if let Some(s) = &rt.sampler {
            s.stop();
        }
        crate::sigwrap::consume_pending_sampling_signals();
    });
    let rc = exec();
    // Only reached when the exec failed: profiling goes on.
    let errno = std::io::Error::last_os_error();
    let _ = std::panic::catch_unwind(|| {
        rt.segment.exec_failed();
        if let Some(s) = &rt.sampler {
            s.restart();
        }
    });
    if let Some(code) = errno.raw_os_error() {
        // SAFETY: restoring errno for the caller.
        unsafe { *libc::__errno_location() = code };
    }
    rc
}

/// In a `vfork` child: records in the (suspended) parent thread's ring
/// that this child runs an image that will not be profiled.
fn note_vfork_child_exec(target_and_reason: impl FnOnce() -> (Vec<u8>, u32)) {
    let Some(rt) = crate::state::current() else {
        return;
    };
    let Some(slot) = crate::events::my_slot(rt) else {
        return;
    };
    let (target, reason) = target_and_reason();
    if reason == exec_reason::NONE {
        return;
    }
    // SAFETY: getpid has no preconditions (the child's own pid).
    let mut bytes = unsafe { libc::getpid() }.to_le_bytes().to_vec();
    bytes.extend_from_slice(&target);
    crate::events::emit(
        rt,
        slot,
        strobe_core::shm::wire::event::CHILD_EXEC,
        reason,
        0,
        &bytes,
    );
}

/// The process's environment (for the exec variants without `envp`).
fn current_environment() -> Argv {
    // SAFETY: reading glibc's `environ` pointer.
    unsafe { environ }
}

/// Interposes `execve`.
///
/// # Safety
/// Same contract as `execve`.
#[no_mangle]
pub unsafe extern "C" fn execve(path: *const libc::c_char, argv: Argv, envp: Argv) -> libc::c_int {
    let real_exec = real!(REAL_EXECVE as fn(*const libc::c_char, Argv, Argv) -> libc::c_int);
    // SAFETY: forwarding the caller's arguments.
    around_exec(path, envp, || unsafe { real_exec(path, argv, envp) })
}

/// Interposes `execv`.
///
/// # Safety
/// Same contract as `execv`.
#[no_mangle]
pub unsafe extern "C" fn execv(path: *const libc::c_char, argv: Argv) -> libc::c_int {
    let real_exec = real!(REAL_EXECV as fn(*const libc::c_char, Argv) -> libc::c_int);
    // SAFETY: forwarding the caller's arguments.
    around_exec(path, current_environment(), || unsafe {
        real_exec(path, argv)
    })
}

/// Interposes `execvp`.
///
/// # Safety
/// Same contract as `execvp`.
#[no_mangle]
pub unsafe extern "C" fn execvp(file: *const libc::c_char, argv: Argv) -> libc::c_int {
    let real_exec = real!(REAL_EXECVP as fn(*const libc::c_char, Argv) -> libc::c_int);
    // SAFETY: forwarding the caller's arguments.
    around_exec(file, current_environment(), || unsafe {
        real_exec(file, argv)
    })
}

/// Interposes `execvpe`.
///
/// # Safety
/// Same contract as `execvpe`.
#[no_mangle]
pub unsafe extern "C" fn execvpe(file: *const libc::c_char, argv: Argv, envp: Argv) -> libc::c_int {
    let real_exec = real!(REAL_EXECVPE as fn(*const libc::c_char, Argv, Argv) -> libc::c_int);
    // SAFETY: forwarding the caller's arguments.
    around_exec(file, envp, || unsafe { real_exec(file, argv, envp) })
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
