//! Starting a collector when the runtime was preloaded without
//! `strobe sample` (a batch system sets `LD_PRELOAD` itself).
//!
//! Owns finding the `strobe` executable (`STROBE_BIN`, else next to this
//! library: the build tree, `cargo test`'s `deps/`, or an installed
//! `<prefix>/lib/strobe/`), starting `strobe collect-for PID` out of the
//! program's sight, and taking its answer: the collector's address and the
//! resolved configuration, which go into the environment so that every
//! process the program starts uses the same collector. Runs in stage 1
//! (before `main`).
//!
//! Never leaves a trace in the program: the collector is started through
//! an intermediate process created with no exit signal (so neither
//! `SIGCHLD` nor a plain `wait` of the program ever sees it) and reaped
//! here at once; the collector itself is the intermediate's orphan, in a
//! session of its own, holding none of the program's descriptors but
//! stderr (stdin and stdout are `/dev/null`). Every descriptor opened here
//! is closed before returning.

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use strobe_wire::config::{COLLECTOR_ENV, CONFIG_ENV};

/// The variable naming the `strobe` executable to start.
pub const STROBE_BIN_ENV: &str = "STROBE_BIN";
/// Set in the collector's environment: a runtime loaded into it some other
/// way (`/etc/ld.so.preload`, a wrapper) must not start another one.
const NO_SELF_START: &str = "STROBE_INTERNAL_NO_SELF_START=1";

/// Whether this process should start a collector for itself: the runtime
/// was preloaded by name (not linked into a test binary, not loaded into a
/// collector).
pub fn wanted() -> bool {
    let preloaded = std::env::var_os("LD_PRELOAD").is_some_and(|p| {
        p.as_encoded_bytes()
            .windows(14)
            .any(|w| w == b"strobe_runtime")
    });
    let name = &NO_SELF_START[..NO_SELF_START.len() - 2];
    preloaded && std::env::var_os(name).is_none()
}
/// How long the runtime waits for the collector's answer.
const ANSWER_TIMEOUT_MS: i32 = 10_000;

extern "C" {
    static environ: *const *const libc::c_char;
}

/// Where this library was loaded from.
fn own_path() -> Option<PathBuf> {
    // SAFETY: Dl_info is plain old data filled by dladdr.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr with the address of one of our functions.
    if unsafe { libc::dladdr(own_path as *const libc::c_void, &mut info) } == 0
        || info.dli_fname.is_null()
    {
        return None;
    }
    // SAFETY: dladdr returned a NUL-terminated file name.
    let name = unsafe { CStr::from_ptr(info.dli_fname) };
    Some(PathBuf::from(std::ffi::OsStr::from_bytes(name.to_bytes())))
}

/// The `strobe` executable to start.
fn strobe_executable() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os(STROBE_BIN_ENV).filter(|b| !b.is_empty()) {
        return Some(PathBuf::from(bin)).filter(|p| p.is_file());
    }
    let lib = std::fs::canonicalize(own_path()?).ok()?;
    let dir = lib.parent()?;
    let candidates = [
        dir.join("strobe"),
        dir.parent().map(|d| d.join("strobe"))?,
        dir.parent()
            .and_then(Path::parent)
            .map(|d| d.join("bin").join("strobe"))?,
    ];
    candidates.into_iter().find(|p| p.is_file())
}

/// Starts a collector for this process and puts its address and the
/// configuration into the environment. An error says why profiling is
/// off.
pub fn start_collector() -> Result<(), String> {
    let exe = strobe_executable().ok_or_else(|| {
        format!(
            "no `strobe` executable found ({STROBE_BIN_ENV} unset or not a file, none next to \
             the runtime); set {STROBE_BIN_ENV} to its path, or run the program with `strobe sample`"
        )
    })?;
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    let c = |s: &[u8]| CString::new(s).map_err(|_| "a NUL byte in a path".to_string());
    let path = c(exe.as_os_str().as_bytes())?;
    let args = [
        path.clone(),
        c(b"collect-for")?,
        c(pid.to_string().as_bytes())?,
        c(b"--report-fd")?,
        c(b"3")?,
    ];
    let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = Vec::new();
    let mut i = 0;
    loop {
        // SAFETY: environ is a NULL-terminated array of C strings.
        let entry = unsafe { *environ.add(i) };
        if entry.is_null() {
            break;
        }
        // SAFETY: each entry is NUL-terminated.
        if !unsafe { CStr::from_ptr(entry) }
            .to_bytes()
            .starts_with(b"LD_PRELOAD=")
        {
            envp.push(entry);
        }
        i += 1;
    }
    let marker = c(NO_SELF_START.as_bytes())?;
    envp.push(marker.as_ptr());
    envp.push(std::ptr::null());
    let answer = spawn_and_read(&path, &argv, &envp)?;
    let text = String::from_utf8_lossy(&answer);
    let mut lines = text.lines();
    let (Some(address), Some(config)) = (lines.next(), lines.next()) else {
        return Err(format!(
            "the collector ({}) did not answer (see the messages above, if any)",
            exe.display()
        ));
    };
    std::env::set_var(COLLECTOR_ENV, address);
    std::env::set_var(CONFIG_ENV, config);
    Ok(())
}

/// Starts `path` with `argv`/`envp` as the orphan of an intermediate
/// process, its descriptor 3 the writing end of a pipe, and returns what
/// it wrote there before closing it.
fn spawn_and_read(
    path: &CStr,
    argv: &[*const libc::c_char],
    envp: &[*const libc::c_char],
) -> Result<Vec<u8>, String> {
    let mut pipe = [0i32; 2];
    // SAFETY: pipe2 into a local array.
    if unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!(
            "cannot create a pipe: {}",
            std::io::Error::last_os_error()
        ));
    }
    let [read_end, write_end] = pipe;
    let null = c"/dev/null";
    // No signal may run the program's handlers in the copies before exec.
    // SAFETY: sigset_t is plain old data; blocking every signal, keeping
    // the old mask.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid set pointers.
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
    }
    // SAFETY: a fork-like clone with no exit signal; the child only makes
    // system calls (no allocation, no lock) and ends with _exit.
    let intermediate = unsafe { libc::syscall(libc::SYS_clone, 0, 0, 0, 0, 0) } as libc::pid_t;
    if intermediate == 0 {
        // SAFETY: the intermediate process: system calls only.
        unsafe { intermediate_process(path, argv, envp, write_end, null) };
    }
    // SAFETY: restoring the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    // SAFETY: closing our copy of the writing end.
    unsafe { libc::close(write_end) };
    if intermediate < 0 {
        // SAFETY: closing the reading end we own.
        unsafe { libc::close(read_end) };
        return Err(format!(
            "cannot start the collector: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: reaping the intermediate (a clone child: __WCLONE).
    while unsafe { libc::waitpid(intermediate, std::ptr::null_mut(), libc::__WCLONE) } < 0
        && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
    {}
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let mut wait = libc::pollfd {
            fd: read_end,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let ready = unsafe { libc::poll(&mut wait, 1, ANSWER_TIMEOUT_MS) };
        if ready == 0 {
            break;
        }
        if ready < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            break;
        }
        // SAFETY: reading into a local buffer.
        let n = unsafe { libc::read(read_end, buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            break;
        }
        answer.extend_from_slice(&buf[..n as usize]);
    }
    // SAFETY: closing the reading end we own.
    unsafe { libc::close(read_end) };
    Ok(answer)
}

/// The intermediate process: starts the collector as its own child and
/// ends, leaving it an orphan. **Runs after a raw `clone`**: system calls
/// only.
///
/// # Safety
/// Only in the child of the clone above, with valid arrays.
unsafe fn intermediate_process(
    path: &CStr,
    argv: &[*const libc::c_char],
    envp: &[*const libc::c_char],
    write_end: i32,
    null: &CStr,
) -> ! {
    // SAFETY: a plain fork-like clone (SIGCHLD to the intermediate, which
    // ends at once: the collector is reparented).
    let collector =
        unsafe { libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_long, 0, 0, 0, 0) };
    if collector == 0 {
        // SAFETY: system calls on descriptors and arrays prepared before
        // the clone; exec or _exit.
        unsafe {
            libc::setsid();
            if write_end == 3 {
                libc::fcntl(3, libc::F_SETFD, 0);
            } else {
                libc::dup2(write_end, 3);
            }
            if libc::syscall(libc::SYS_close_range, 4u32, u32::MAX, 0u32) != 0 {
                for fd in 4..65536 {
                    libc::close(fd);
                }
            }
            let devnull = libc::open(null.as_ptr(), libc::O_RDWR);
            if devnull >= 0 {
                libc::dup2(devnull, 0);
                libc::dup2(devnull, 1);
                if devnull > 3 {
                    libc::close(devnull);
                }
            }
            // Default dispositions (exec keeps ignored ones), then unblock.
            let mut default: libc::sigaction = std::mem::zeroed();
            default.sa_sigaction = libc::SIG_DFL;
            for signal in 1..libc::SIGRTMAX() {
                libc::sigaction(signal, &default, std::ptr::null_mut());
            }
            let empty: libc::sigset_t = std::mem::zeroed();
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr());
            let message = b"strobe: the runtime could not start its collector (exec failed)\n";
            libc::write(2, message.as_ptr().cast(), message.len());
            libc::_exit(127)
        }
    }
    // SAFETY: ending the intermediate without running the program's exit
    // handlers.
    unsafe { libc::_exit(0) }
}
