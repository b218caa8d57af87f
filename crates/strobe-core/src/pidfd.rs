//! Process descriptors (`pidfd`): a handle on a process that becomes
//! readable when it ends.
//!
//! Owns opening one and waiting on it. Never signals or reaps the process.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A descriptor of process `pid` (close-on-exec, as the kernel makes it).
pub fn open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open with a pid and no flags.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor the kernel just returned, owned from here.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Waits at most `timeout_ms` (-1: for ever) for the process to end;
/// returns whether it has.
pub fn ended(fd: &OwnedFd, timeout_ms: i32) -> bool {
    let mut wait = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut wait, 1, timeout_ms) };
        if n >= 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return n > 0;
        }
    }
}
