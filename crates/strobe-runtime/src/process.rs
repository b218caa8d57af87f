//! Process life-cycle wrappers: `fork`, `posix_spawn` and the `exec`
//! family.
//!
//! Owns what happens to the profile when the process forks (the child gets
//! a segment of its own, or stops profiling, per `fork_mode`), telling the
//! collector about every child it starts (so a child whose parent ends at
//! once is still waited for, and a spawned image that will not be profiled
//! is named), and when it
//! replaces its image (the segment is marked, timers deleted and any of
//! strobe's signals still pending on this thread consumed, so the new
//! image never meets one; the note says why the new image will not be
//! profiled when that can be seen from here). `_exit` needs no wrapper:
//! everything collected is already in shared memory. Never runs in a
//! signal handler.

use crate::interpose::{real, RealFn};
use std::ffi::CStr;
use strobe_wire::config::{COLLECTOR_ENV, CONFIG_ENV};
use strobe_wire::segment::exec_reason;

static REAL_FORK: RealFn = RealFn::new(c"fork");
static REAL_EXECVE: RealFn = RealFn::new(c"execve");
static REAL_EXECV: RealFn = RealFn::new(c"execv");
static REAL_EXECVP: RealFn = RealFn::new(c"execvp");
static REAL_EXECVPE: RealFn = RealFn::new(c"execvpe");
static REAL_POSIX_SPAWN: RealFn = RealFn::new(c"posix_spawn");
static REAL_POSIX_SPAWNP: RealFn = RealFn::new(c"posix_spawnp");

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
    match parent {
        Some(parent) if pid == 0 => {
            let _ = std::panic::catch_unwind(|| after_fork_in_child(parent));
        }
        Some(parent) if pid > 0 && parent.config.fork_follow => {
            let errno = Errno::save();
            let _ = std::panic::catch_unwind(|| note_child(parent, pid, exec_reason::NONE, &[]));
            errno.restore();
        }
        _ => {}
    }
    pid
}

/// `errno` kept across strobe's own calls in a wrapper.
struct Errno(libc::c_int);

impl Errno {
    fn save() -> Errno {
        // SAFETY: reading this thread's errno.
        Errno(unsafe { *libc::__errno_location() })
    }

    fn restore(self) {
        // SAFETY: writing this thread's errno.
        unsafe { *libc::__errno_location() = self.0 };
    }
}

/// Records in this thread's ring that it started child `pid`, which runs
/// `target` (empty when unchanged) and will be profiled unless `reason`
/// says otherwise.
fn note_child(rt: &crate::state::Runtime, pid: libc::pid_t, reason: u32, target: &[u8]) {
    // A thread without a slot yet (adopted, or started by a raw clone)
    // gets one: an announcement must not be lost.
    if let Some(slot) = crate::thread_slot::slot_of_current_thread(rt) {
        emit_child(rt, slot, pid, reason, target);
    }
}

/// Writes the `CHILD` event into `slot`'s ring.
fn emit_child(rt: &crate::state::Runtime, slot: u32, pid: libc::pid_t, reason: u32, target: &[u8]) {
    let mut bytes = pid.to_le_bytes().to_vec();
    bytes.extend_from_slice(target);
    crate::events::emit(
        rt,
        slot,
        strobe_wire::record::event::CHILD,
        reason,
        0,
        &bytes,
    );
}

/// Why the image `target` run with environment `envp` will not be
/// profiled (`exec_reason::NONE` when it will).
fn reason_for(target: &[u8], envp: Argv) -> u32 {
    if environment_carries_strobe(envp) {
        strobe_core::image::exec_reason_for(target)
    } else {
        exec_reason::ENVIRONMENT
    }
}

fn after_fork_in_child(parent: &'static crate::state::Runtime) {
    // The parent's counter descriptors count the parent's threads.
    if let Some(counters) = &parent.counters {
        counters.close_inherited();
    }
    strobe_core::thread::refresh_after_fork();
    crate::tools::after_fork_in_child();
    strobe_sampler::snapshot::reset_after_fork();
    let spare = crate::state::abandon_after_fork(parent);
    crate::events::clear_my_slot();
    if parent.config.fork_follow {
        // The parent's sampling signals and their handler are this
        // process's too: the child samples with them rather than looking
        // for free signals again (a system call per signal).
        let mut config = parent.config.clone();
        let chosen = &parent.segment.header().signals;
        for (signal, chosen) in [&mut config.cputime_signal, &mut config.realtime_signal]
            .into_iter()
            .zip(chosen)
        {
            if *signal == 0 {
                *signal = chosen.load(std::sync::atomic::Ordering::Acquire);
            }
        }
        crate::stage2::start_child(config, spare);
    }
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
            strobe_core::image::resolve_command(unsafe { CStr::from_ptr(file) }.to_bytes())
        };
        let reason = reason_for(&target, envp);
        (target, reason)
    };
    // In a vfork child (subprocess launchers use it) the runtime is the
    // parent's: its state is left alone; the parent's suspended thread's
    // ring names the child and whether its new image will be profiled.
    let Some(rt) = crate::state::owned() else {
        let _ = std::panic::catch_unwind(|| note_vfork_child_exec(target_and_reason));
        return exec();
    };
    let _ = std::panic::catch_unwind(|| {
        let (target, reason) = target_and_reason();
        // A forked child that recorded nothing stays unseen when its new
        // image brings the runtime; the collector must learn of one that
        // will not be profiled (it says so, or samples it by the kernel).
        if reason != exec_reason::NONE {
            crate::dormant::wake_and_report();
        }
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
        Errno(code).restore();
    }
    rc
}

/// In a `vfork` child: records in the (suspended) parent thread's ring
/// that this child runs a new image, and whether it will be profiled.
fn note_vfork_child_exec(target_and_reason: impl FnOnce() -> (Vec<u8>, u32)) {
    let Some(rt) = crate::state::current() else {
        return;
    };
    let (target, reason) = target_and_reason();
    // The suspended parent thread's slot only: claiming one from here would
    // change the parent's state.
    if let Some(slot) = crate::events::my_slot(rt) {
        // SAFETY: getpid has no preconditions (the child's own pid).
        emit_child(rt, slot, unsafe { libc::getpid() }, reason, &target);
    }
}

static REAL_POPEN: RealFn = RealFn::new(c"popen");

/// Interposes `popen`: glibc starts the shell with an internal
/// `posix_spawn` the wrappers do not see, and a caller may end without
/// `pclose`; the children of this thread are announced from
/// `/proc/thread-self/children`.
///
/// # Safety
/// Same contract as `popen`.
#[no_mangle]
pub unsafe extern "C" fn popen(
    command: *const libc::c_char,
    mode: *const libc::c_char,
) -> *mut libc::FILE {
    let real_popen =
        real!(REAL_POPEN as fn(*const libc::c_char, *const libc::c_char) -> *mut libc::FILE);
    // SAFETY: forwarding the caller's arguments.
    let stream = unsafe { real_popen(command, mode) };
    if !stream.is_null() {
        if let Some(rt) = crate::state::owned() {
            let errno = Errno::save();
            let _ = std::panic::catch_unwind(|| {
                let children =
                    std::fs::read_to_string("/proc/thread-self/children").unwrap_or_default();
                for pid in children.split_whitespace().filter_map(|p| p.parse().ok()) {
                    note_child(rt, pid, exec_reason::NONE, &[]);
                }
            });
            errno.restore();
        }
    }
    stream
}

/// Runs a `posix_spawn` variant (`spawn`, given where to put the child's
/// pid) and names the child it started. glibc's spawn runs `exec` inside
/// without the `exec` wrappers, so this is where an image that will not
/// be profiled shows. `search_path`: `file` is looked up in `PATH`.
fn around_spawn(
    pid: *mut libc::pid_t,
    file: *const libc::c_char,
    search_path: bool,
    envp: Argv,
    spawn: impl FnOnce(*mut libc::pid_t) -> libc::c_int,
) -> libc::c_int {
    let mut child: libc::pid_t = 0;
    let rc = spawn(&mut child);
    if rc != 0 {
        return rc;
    }
    if !pid.is_null() {
        // SAFETY: the caller's pid pointer, non-null.
        unsafe { *pid = child };
    }
    if let Some(rt) = crate::state::owned() {
        let errno = Errno::save();
        let _ = std::panic::catch_unwind(|| {
            // SAFETY: spawn's file argument is NUL-terminated.
            let file = unsafe { CStr::from_ptr(file) }.to_bytes();
            let target = if search_path {
                strobe_core::image::resolve_command(file)
            } else {
                file.to_vec()
            };
            note_child(rt, child, reason_for(&target, envp), &target);
        });
        errno.restore();
    }
    rc
}

/// `posix_spawn` and `posix_spawnp` (same signature).
type SpawnFn = unsafe extern "C" fn(
    *mut libc::pid_t,
    *const libc::c_char,
    *const libc::posix_spawn_file_actions_t,
    *const libc::posix_spawnattr_t,
    Argv,
    Argv,
) -> libc::c_int;

/// The real spawn function behind `which`.
fn real_spawn(which: &RealFn) -> SpawnFn {
    let address = which.require();
    // SAFETY: the address is the next definition of posix_spawn or
    // posix_spawnp, whose C signature SpawnFn is.
    unsafe { std::mem::transmute::<usize, SpawnFn>(address) }
}

/// Interposes `posix_spawn`.
///
/// # Safety
/// Same contract as `posix_spawn`.
#[no_mangle]
pub unsafe extern "C" fn posix_spawn(
    pid: *mut libc::pid_t,
    path: *const libc::c_char,
    actions: *const libc::posix_spawn_file_actions_t,
    attr: *const libc::posix_spawnattr_t,
    argv: Argv,
    envp: Argv,
) -> libc::c_int {
    let spawn = real_spawn(&REAL_POSIX_SPAWN);
    around_spawn(pid, path, false, envp, |child| {
        // SAFETY: forwarding the caller's arguments, with our own pid out.
        unsafe { spawn(child, path, actions, attr, argv, envp) }
    })
}

/// Interposes `posix_spawnp`.
///
/// # Safety
/// Same contract as `posix_spawnp`.
#[no_mangle]
pub unsafe extern "C" fn posix_spawnp(
    pid: *mut libc::pid_t,
    file: *const libc::c_char,
    actions: *const libc::posix_spawn_file_actions_t,
    attr: *const libc::posix_spawnattr_t,
    argv: Argv,
    envp: Argv,
) -> libc::c_int {
    let spawn = real_spawn(&REAL_POSIX_SPAWNP);
    around_spawn(pid, file, true, envp, |child| {
        // SAFETY: forwarding the caller's arguments, with our own pid out.
        unsafe { spawn(child, file, actions, attr, argv, envp) }
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::testing::{events, small};
    use std::ffi::CString;
    use strobe_wire::record::event;

    /// A NULL-terminated environment array over `entries` (kept alive by
    /// the returned strings).
    fn environment(entries: &[&str]) -> (Vec<CString>, Vec<*const libc::c_char>) {
        let strings: Vec<CString> = entries.iter().map(|e| CString::new(*e).unwrap()).collect();
        let mut pointers: Vec<*const libc::c_char> = strings.iter().map(|s| s.as_ptr()).collect();
        pointers.push(std::ptr::null());
        (strings, pointers)
    }

    fn carries(entries: &[&str]) -> bool {
        let (_keep, envp) = environment(entries);
        environment_carries_strobe(envp.as_ptr())
    }

    #[test]
    fn only_an_environment_with_all_of_strobes_variables_carries_it() {
        let collector = format!("{COLLECTOR_ENV}=strobe-1-abc");
        let config = format!("{CONFIG_ENV}=cputime_hz=250");
        let preload = "LD_PRELOAD=/opt/strobe/lib/libstrobe_runtime.so";
        assert!(carries(&["HOME=/root", &collector, &config, preload]));
        assert!(carries(&[preload, &config, &collector]), "in any order");
        assert!(!carries(&[&config, preload]), "no collector");
        assert!(!carries(&[&collector, preload]), "no configuration");
        assert!(!carries(&[&collector, &config]), "no runtime preloaded");
        assert!(!carries(&[
            &collector,
            &config,
            "LD_PRELOAD=/lib/libother.so"
        ]));
        // Names that merely start like strobe's.
        let longer = format!("{COLLECTOR_ENV}X=1");
        assert!(!carries(&[&longer, &config, preload]));
        assert!(!carries(&[COLLECTOR_ENV, &config, preload]), "no `=`");
        assert!(!carries(&[]));
        assert!(!environment_carries_strobe(std::ptr::null()));
    }

    #[test]
    fn an_image_started_without_strobes_environment_is_not_profiled_for_that() {
        let (_keep, envp) = environment(&["PATH=/usr/bin"]);
        assert_eq!(
            reason_for(b"/bin/sh", envp.as_ptr()),
            exec_reason::ENVIRONMENT
        );
        assert_eq!(reason_for(b"", envp.as_ptr()), exec_reason::ENVIRONMENT);
        assert_eq!(
            reason_for(b"/bin/sh", std::ptr::null()),
            exec_reason::ENVIRONMENT
        );
    }

    #[test]
    fn a_child_is_announced_as_the_collector_reads_it() {
        let rt = small();
        // A thread without a slot gets one: the announcement is not lost.
        note_child(rt, 4242, exec_reason::NONE, &[]);
        note_child(rt, 4343, exec_reason::STATIC, b"/opt/static-tool");
        let slot = crate::events::my_slot(rt).expect("a slot");
        let got = events(rt, slot);
        let children: Vec<_> = got
            .iter()
            .filter(|(head, _)| head.kind == event::CHILD)
            .collect();
        assert_eq!(children.len(), 2, "{got:?}");
        let (head, bytes) = children[0];
        assert_eq!(head.arg, exec_reason::NONE);
        assert_eq!(bytes, &4242i32.to_le_bytes());
        let (head, bytes) = children[1];
        assert_eq!(head.arg, exec_reason::STATIC);
        assert_eq!(i32::from_le_bytes(bytes[..4].try_into().unwrap()), 4343);
        assert_eq!(&bytes[4..], b"/opt/static-tool");
    }

    #[test]
    fn errno_survives_what_a_wrapper_does_after_the_call() {
        // SAFETY: writing this thread's errno.
        unsafe { *libc::__errno_location() = libc::EAGAIN };
        let saved = Errno::save();
        // SAFETY: as above.
        unsafe { *libc::__errno_location() = libc::ENOENT };
        saved.restore();
        // SAFETY: reading this thread's errno.
        assert_eq!(unsafe { *libc::__errno_location() }, libc::EAGAIN);
    }
}
