//! A program started but held before its first instruction: forked, waiting
//! on a pipe, until strobe has attached what must count it from `exec` on
//! (counters opened on its pid with enable-on-exec), then released to
//! `exec`.
//!
//! Owns the fork, the hold, the `exec` and its failure report, and the
//! wait with the child's resource usage. Never runs anything but
//! async-signal-safe calls between `fork` and `exec`, and never leaves a
//! held child behind: one not released is killed and reaped.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

/// A forked child waiting to `exec` the command.
pub struct Held {
    pid: libc::pid_t,
    /// Write end of the pipe the child waits on.
    go: libc::c_int,
    /// Read end of the pipe the child reports an `exec` failure on
    /// (close-on-exec: end of file means it executed).
    failed: libc::c_int,
    released: bool,
}

/// Why the command did not start: exit code (127 not found, 126 otherwise,
/// as shells report it) and message.
pub struct NotStarted(pub i32, pub String);

fn pipe(flags: libc::c_int) -> std::io::Result<[libc::c_int; 2]> {
    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), flags) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(fds)
}

impl Held {
    /// Forks a child that will run `command` (looked up on `PATH`) once
    /// released.
    pub fn spawn(command: &[OsString]) -> std::io::Result<Held> {
        let args: Vec<CString> = command
            .iter()
            .map(|a| CString::new(a.as_bytes()))
            .collect::<Result<_, _>>()
            .map_err(|_| std::io::Error::other("an argument contains a NUL byte"))?;
        let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        let [go_r, go_w] = pipe(libc::O_CLOEXEC)?;
        let [failed_r, failed_w] = pipe(libc::O_CLOEXEC)?;
        // SAFETY: the CLI is single-threaded here; the child only calls
        // async-signal-safe functions (read, write, signal, execvp on
        // prepared strings, _exit).
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if pid == 0 {
            // **Between fork and exec**: no allocation, no locks.
            // SAFETY: descriptors and strings prepared before the fork.
            unsafe {
                let mut byte = 0u8;
                loop {
                    let n = libc::read(go_r, (&mut byte as *mut u8).cast(), 1);
                    if n == 1 {
                        break;
                    }
                    if n == 0 || *libc::__errno_location() != libc::EINTR {
                        libc::_exit(127);
                    }
                }
                // Rust ignores SIGPIPE in strobe; the program gets the
                // default it would get from a shell.
                libc::signal(libc::SIGPIPE, libc::SIG_DFL);
                libc::execvp(argv[0], argv.as_ptr());
                let errno = *libc::__errno_location();
                libc::write(failed_w, (&errno as *const i32).cast(), 4);
                libc::_exit(127);
            }
        }
        // SAFETY: closing the child's ends in the parent.
        unsafe {
            libc::close(go_r);
            libc::close(failed_w);
        }
        Ok(Held {
            pid,
            go: go_w,
            failed: failed_r,
            released: false,
        })
    }

    /// The child's pid.
    pub fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// Lets the child `exec`; an `exec` failure (not found, not
    /// executable) comes back as [`NotStarted`] with the child reaped.
    pub fn release(&mut self, name: &str) -> Result<(), NotStarted> {
        self.released = true;
        let byte = 1u8;
        // SAFETY: writing one byte from a live local to our pipe end.
        unsafe {
            libc::write(self.go, (&byte as *const u8).cast(), 1);
            libc::close(self.go);
        }
        let mut errno = 0i32;
        let n = loop {
            // SAFETY: reading 4 bytes into a live i32.
            let n = unsafe { libc::read(self.failed, (&mut errno as *mut i32).cast(), 4) };
            if n >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                break n;
            }
        };
        // SAFETY: closing our own descriptor.
        unsafe { libc::close(self.failed) };
        if n != 4 {
            return Ok(());
        }
        let _ = self.wait();
        let e = std::io::Error::from_raw_os_error(errno);
        Err(match e.kind() {
            std::io::ErrorKind::NotFound => {
                NotStarted(127, format!("cannot run '{name}': command not found"))
            }
            std::io::ErrorKind::PermissionDenied => {
                NotStarted(126, format!("cannot run '{name}': permission denied"))
            }
            _ => NotStarted(126, format!("cannot run '{name}': {e}")),
        })
    }

    /// Waits for the child to end; its status and resource usage.
    pub fn wait(&self) -> std::io::Result<(ExitStatus, libc::rusage)> {
        loop {
            if let Some(done) = self.poll(0)? {
                return Ok(done);
            }
        }
    }

    /// The child's status and resource usage if it has ended (`flags` 0
    /// waits, `libc::WNOHANG` does not).
    pub fn poll(&self, flags: libc::c_int) -> std::io::Result<Option<(ExitStatus, libc::rusage)>> {
        let mut status = 0;
        // SAFETY: rusage is plain old data.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointers to locals.
        let r = unsafe { libc::wait4(self.pid, &mut status, flags, &mut usage) };
        match r {
            0 => Ok(None),
            r if r == self.pid => Ok(Some((ExitStatus::from_raw(status), usage))),
            _ => {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    Ok(None)
                } else {
                    Err(e)
                }
            }
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if !self.released {
            // SAFETY: our own child and descriptors.
            unsafe {
                libc::kill(self.pid, libc::SIGKILL);
                libc::close(self.go);
                libc::close(self.failed);
            }
            let _ = self.wait();
        }
    }
}
