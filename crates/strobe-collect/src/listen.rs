//! The collector's socket: where each runtime hands over its segment.
//!
//! Owns the abstract-namespace `SOCK_SEQPACKET` listener (no file to
//! clean up, nothing in the program's working directory) and receiving a
//! runtime's message: its pid, the segment's `memfd` and a pidfd of the
//! process, passed with `SCM_RIGHTS`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A listening socket.
pub struct Listener {
    fd: OwnedFd,
    name: String,
}

/// What one runtime sent.
pub struct Handover {
    /// The process id the runtime reported.
    pub pid: i32,
    /// The segment.
    pub segment: OwnedFd,
    /// A pidfd of the process.
    pub pidfd: OwnedFd,
}

impl Listener {
    /// Listens on a fresh abstract name unique to this process.
    pub fn bind() -> io::Result<Listener> {
        // SAFETY: socket(2) with constant arguments.
        let fd = unsafe {
            libc::socket(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                0,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor we just created and own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut random = [0u8; 8];
        // SAFETY: getrandom into a local buffer.
        unsafe { libc::getrandom(random.as_mut_ptr() as *mut libc::c_void, 8, 0) };
        let name = format!(
            "strobe-{}-{:016x}",
            std::process::id(),
            u64::from_le_bytes(random)
        );
        let (addr, len) = strobe_core::shm::socket::abstract_address(&name)?;
        // SAFETY: a valid address of `len` bytes.
        if unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &addr as *const _ as *const libc::sockaddr,
                len,
            )
        } != 0
        {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: listening on our bound socket.
        if unsafe { libc::listen(fd.as_raw_fd(), 4096) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Listener { fd, name })
    }

    /// The abstract name runtimes connect to.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The descriptor to poll for new connections.
    pub fn raw_fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    /// Every handover waiting now (never blocks). Malformed messages are
    /// skipped.
    pub fn accept_all(&self) -> Vec<Handover> {
        let mut out = Vec::new();
        loop {
            // SAFETY: accept4 on our listening socket, no address wanted.
            let conn = unsafe {
                libc::accept4(
                    self.fd.as_raw_fd(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    libc::SOCK_CLOEXEC,
                )
            };
            if conn < 0 {
                return out;
            }
            // SAFETY: a descriptor accept4 just returned.
            let conn = unsafe { OwnedFd::from_raw_fd(conn) };
            if let Some(h) = receive(&conn) {
                out.push(h);
            }
        }
    }
}

/// Reads one message with two descriptors.
fn receive(conn: &OwnedFd) -> Option<Handover> {
    let mut pid = [0u8; 4];
    let mut iov = libc::iovec {
        iov_base: pid.as_mut_ptr() as *mut libc::c_void,
        iov_len: 4,
    };
    let mut control = [0u64; 8];
    // SAFETY: msghdr is plain old data.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = std::mem::size_of_val(&control);
    // SAFETY: a connected socket and a valid message; blocks until the
    // runtime's single message (already queued when it connected) arrives.
    let n = unsafe { libc::recvmsg(conn.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    let mut fds = Vec::new();
    // SAFETY: walking the control messages the kernel filled in.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let count = ((*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / 4;
                let data = libc::CMSG_DATA(cmsg) as *const i32;
                for i in 0..count {
                    fds.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    if n != 4 || fds.len() != 2 {
        return None;
    }
    let pidfd = fds.pop()?;
    let segment = fds.pop()?;
    Some(Handover {
        pid: i32::from_le_bytes(pid),
        segment,
        pidfd,
    })
}
