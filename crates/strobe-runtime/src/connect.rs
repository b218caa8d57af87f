//! Handing this process's segment to the collector.
//!
//! Owns the one message the runtime sends: over a `SOCK_SEQPACKET`
//! connection to the collector's abstract socket, the segment's `memfd`
//! and a pidfd of this process (so the collector watches exactly this
//! process, whatever happens to the pid later), passed with
//! `SCM_RIGHTS`. Every descriptor opened here is closed before returning:
//! the program never sees one of strobe's descriptors.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The collector's abstract socket address and its length.
pub type Address = (libc::sockaddr_un, libc::socklen_t);

/// Sends `segment_fd` and a pidfd of this process to the collector at
/// `addr`. **Signal handler** safe: system calls only, nothing allocated
/// (errors are the system's codes).
pub fn hand_over_to(addr: &Address, segment_fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: socket(2) with constant arguments.
    let sock = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) };
    if sock < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor we just created and own.
    let sock = unsafe { OwnedFd::from_raw_fd(sock) };
    let (addr, len) = addr;
    // SAFETY: a valid address of `len` bytes.
    if unsafe {
        libc::connect(
            sock.as_raw_fd(),
            addr as *const libc::sockaddr_un as *const libc::sockaddr,
            *len,
        )
    } != 0
    {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: getpid has no preconditions.
    let pidfd = strobe_core::pidfd::open(unsafe { libc::getpid() })?;
    send_fds(&sock, &[segment_fd.as_raw_fd(), pidfd.as_raw_fd()])
}

fn send_fds(sock: &OwnedFd, fds: &[i32; 2]) -> io::Result<()> {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() }.to_le_bytes();
    let mut iov = libc::iovec {
        iov_base: pid.as_ptr() as *mut libc::c_void,
        iov_len: pid.len(),
    };
    // Control buffer for two descriptors, u64-aligned.
    let mut control = [0u64; 4];
    // SAFETY: msghdr is plain old data.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    // SAFETY: CMSG_SPACE is a pure computation.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(8) } as usize;
    // SAFETY: the control buffer holds one header with two ints.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(8) as usize;
        std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(cmsg) as *mut i32, 2);
    }
    // SAFETY: a connected socket and a valid message.
    if unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
