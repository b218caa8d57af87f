//! Running the profiled program: environment, signal forwarding, exit
//! status.
//!
//! Owns the child process. Ctrl-C from the terminal reaches the program
//! directly (same process group) and the launcher waits for it to finish
//! saving; signals sent to the launcher alone (`kill <strobe pid>`) are
//! forwarded. The child's exit status becomes strobe's.

use anyhow::Result;
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

static CHILD: AtomicI32 = AtomicI32::new(0);
/// A terminating signal reached the launcher (Ctrl-C, `kill`).
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Whether the user interrupted strobe (the collector then stops waiting
/// for processes that outlive the program).
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}
const SI_USER: i32 = 0;
const SI_QUEUE: i32 = -1;
const FORWARDED: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// **Signal handler**: forwards signals sent to the launcher to the child
/// (async-signal-safe: `kill` only).
extern "C" fn forward(signal: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to SA_SIGINFO handlers.
    let code = unsafe { (*info).si_code };
    INTERRUPTED.store(true, Ordering::SeqCst);
    let child = CHILD.load(Ordering::SeqCst);
    if child > 0 && (code == SI_USER || code == SI_QUEUE) {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(child, signal) };
    }
}

/// Notes SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to strobe (see
/// [`interrupted`]) and forwards them to the program, when there is one.
pub fn install_forwarding() {
    for signal in FORWARDED {
        // SAFETY: sigaction is plain old data.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = forward as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        // SAFETY: valid mask pointer; installing a valid handler.
        unsafe {
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// Signals sent to strobe go to `pid` from now on (0: to nobody).
pub fn forward_to(pid: i32) {
    CHILD.store(pid, Ordering::SeqCst);
}

/// How the program ended.
pub enum Outcome {
    /// It could not be started: exit code and message.
    NotStarted(i32, String),
    /// It ran and exited or was killed.
    Finished(ExitStatus),
}

/// Runs `command` with `env` changes and waits for it; `started` learns
/// its pid as soon as it runs.
pub fn run(
    command: &[OsString],
    env: &[(OsString, OsString)],
    remove: &[&str],
    started: impl FnOnce(i32),
) -> Result<Outcome> {
    let (program, args) = command.split_first().expect("clap requires a command");
    let mut cmd = Command::new(program);
    cmd.args(args);
    for var in remove {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    install_forwarding();
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            let name = program.to_string_lossy();
            return Ok(match e.kind() {
                std::io::ErrorKind::NotFound => {
                    Outcome::NotStarted(127, format!("cannot run '{name}': command not found"))
                }
                std::io::ErrorKind::PermissionDenied => {
                    Outcome::NotStarted(126, format!("cannot run '{name}': permission denied"))
                }
                _ => Outcome::NotStarted(126, format!("cannot run '{name}': {e}")),
            });
        }
    };
    CHILD.store(child.id() as i32, Ordering::SeqCst);
    started(child.id() as i32);
    let status = child.wait()?;
    CHILD.store(0, Ordering::SeqCst);
    Ok(Outcome::Finished(status))
}

/// strobe's exit code for the program's status: its exit code, or 128 +
/// the signal that killed it (as shells report it).
pub fn exit_code(status: &ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// A signal's name (`SIGSEGV`), or its number.
pub fn signal_name(signal: i32) -> String {
    let names = [
        (libc::SIGHUP, "SIGHUP"),
        (libc::SIGINT, "SIGINT"),
        (libc::SIGQUIT, "SIGQUIT"),
        (libc::SIGILL, "SIGILL"),
        (libc::SIGABRT, "SIGABRT"),
        (libc::SIGBUS, "SIGBUS"),
        (libc::SIGFPE, "SIGFPE"),
        (libc::SIGKILL, "SIGKILL"),
        (libc::SIGSEGV, "SIGSEGV"),
        (libc::SIGPIPE, "SIGPIPE"),
        (libc::SIGTERM, "SIGTERM"),
    ];
    names
        .iter()
        .find(|(n, _)| *n == signal)
        .map_or_else(|| format!("signal {signal}"), |(_, name)| name.to_string())
}
