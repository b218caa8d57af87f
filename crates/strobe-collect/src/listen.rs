//! The collector's socket: where each runtime hands over its segment.
//!
//! Owns the abstract-namespace `SOCK_SEQPACKET` listener (no file to
//! clean up, nothing in the program's working directory), deciding who
//! may hand over, and receiving a runtime's message: its pid, the
//! segment's `memfd` and a pidfd of the process, passed with
//! `SCM_RIGHTS`.
//!
//! Any local user can see an abstract name (`/proc/net/unix`) and connect
//! to it, so a connection is trusted only once the kernel vouches for its
//! peer: the credentials it recorded at `connect` (`SO_PEERCRED`) must
//! name a process of the run (the caller decides which), and the pidfd
//! the message carries must be of that same process. Everything else is
//! refused and counted. A process not known yet is looked at again for
//! [`UNKNOWN_GRACE_NS`] (a child whose parent ended right after
//! announcing it is known once the parent's ring was read). Never blocks:
//! connections are accepted and read without waiting, a member's message
//! that has not arrived yet is looked for again on later passes until
//! [`RECEIVE_DEADLINE_NS`], and each pass takes at most
//! [`ACCEPTS_PER_PASS`] new connections and keeps at most [`MAX_WAITING`]
//! connections of members and [`MAX_UNKNOWN`] of others, so a flood costs
//! bounded time and memory.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// How long a member's connection may wait for its message.
pub const RECEIVE_DEADLINE_NS: u64 = 10_000_000_000;
/// New connections taken per pass of the collector's loop.
pub const ACCEPTS_PER_PASS: usize = 1024;
/// Connections of members kept waiting for their message at most.
pub const MAX_WAITING: usize = 256;
/// How long a connection from a process not known to be of the run is
/// kept before it is refused.
pub const UNKNOWN_GRACE_NS: u64 = 500_000_000;
/// Connections from processes not known to be of the run kept at most.
pub const MAX_UNKNOWN: usize = 64;
/// Refusals named one by one in the notes; later ones are only counted.
pub const NAMED_REFUSALS: u64 = 8;

/// A listening socket.
pub struct Listener {
    fd: OwnedFd,
    name: String,
    /// Members' connections whose message has not arrived: (connection,
    /// peer pid, when accepted).
    waiting: Vec<(OwnedFd, i32, u64)>,
    /// Connections from processes not known to be of the run yet: (the
    /// connection, its peer, when accepted).
    unknown: Vec<(OwnedFd, Peer, u64)>,
    /// Connections refused so far.
    refused: u64,
}

/// What one runtime sent.
pub struct Handover {
    /// The process id: the peer's, as the kernel recorded it (the same as
    /// the one the runtime reported, unless it runs in another pid
    /// namespace).
    pub pid: i32,
    /// The segment.
    pub segment: OwnedFd,
    /// A pidfd of the process.
    pub pidfd: OwnedFd,
}

/// What one pass over the socket found.
#[derive(Default)]
pub struct Accepted {
    /// Handovers from processes of the run.
    pub handovers: Vec<Handover>,
    /// Notes on what was refused (the first few refusals by name).
    pub notes: Vec<String>,
}

/// Who is at the other end of a connection, as the kernel says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    pub pid: i32,
    pub uid: u32,
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
        let (addr, len) = strobe_wire::socket::abstract_address(&name)?;
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
        Ok(Listener {
            fd,
            name,
            waiting: Vec::new(),
            unknown: Vec::new(),
            refused: 0,
        })
    }

    /// The abstract name runtimes connect to.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The descriptor to poll for new connections.
    pub fn raw_fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    /// Connections refused so far.
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// Whether no connection waits to be decided on or for its message.
    pub fn idle(&self) -> bool {
        self.waiting.is_empty() && self.unknown.is_empty()
    }

    /// One pass (never blocks): takes new connections from peers
    /// `is_member` accepts, and every handover that has arrived on them.
    /// `now_ns` is `CLOCK_MONOTONIC`.
    pub fn accept(&mut self, now_ns: u64, is_member: impl Fn(Peer) -> bool) -> Accepted {
        let mut out = Accepted::default();
        for (conn, p, since) in std::mem::take(&mut self.unknown) {
            if is_member(p) {
                self.wait_for_message(&mut out, conn, p, now_ns);
            } else if now_ns.saturating_sub(since) < UNKNOWN_GRACE_NS {
                self.unknown.push((conn, p, since));
            } else {
                self.refuse_outsider(&mut out, p);
            }
        }
        for _ in 0..ACCEPTS_PER_PASS {
            // SAFETY: accept4 on our listening socket, no address wanted.
            let conn = unsafe {
                libc::accept4(
                    self.fd.as_raw_fd(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                )
            };
            if conn < 0 {
                break;
            }
            // SAFETY: a descriptor accept4 just returned.
            let conn = unsafe { OwnedFd::from_raw_fd(conn) };
            match peer(&conn) {
                Some(p) if is_member(p) => self.wait_for_message(&mut out, conn, p, now_ns),
                Some(p) if self.unknown.len() < MAX_UNKNOWN => self.unknown.push((conn, p, now_ns)),
                Some(p) => self.refuse_outsider(&mut out, p),
                None => self.refuse(
                    &mut out,
                    "refused a connection whose peer the kernel could not name".into(),
                ),
            }
        }
        let mut still = Vec::with_capacity(self.waiting.len());
        for (conn, pid, since) in std::mem::take(&mut self.waiting) {
            match receive(&conn) {
                Received::Nothing if now_ns.saturating_sub(since) < RECEIVE_DEADLINE_NS => {
                    still.push((conn, pid, since));
                }
                Received::Nothing => self.refuse(
                    &mut out,
                    format!(
                        "closed the connection of pid {pid}: it sent nothing within {} s",
                        RECEIVE_DEADLINE_NS / 1_000_000_000
                    ),
                ),
                Received::Message(h) => match pidfd_pid(&h.pidfd) {
                    // A process that ended since it sent (its pidfd names no
                    // pid now) was checked at `connect`.
                    Some(of) if of == pid || of <= 0 => out.handovers.push(Handover { pid, ..h }),
                    of => self.refuse(
                        &mut out,
                        format!(
                            "refused the handover of pid {pid}: its process descriptor is of {}",
                            of.map_or("no pidfd".into(), |p| format!("pid {p}"))
                        ),
                    ),
                },
                Received::Malformed => self.refuse(
                    &mut out,
                    format!("refused the handover of pid {pid}: not a runtime's message"),
                ),
            }
        }
        self.waiting = still;
        out
    }

    /// Keeps a member's connection until its message arrives.
    fn wait_for_message(&mut self, out: &mut Accepted, conn: OwnedFd, p: Peer, now_ns: u64) {
        if self.waiting.len() < MAX_WAITING {
            self.waiting.push((conn, p.pid, now_ns));
            return;
        }
        self.refuse(
            out,
            format!(
                "refused a connection from pid {} (uid {}): {MAX_WAITING} connections of the \
                 run were already waiting for their message",
                p.pid, p.uid
            ),
        );
    }

    fn refuse_outsider(&mut self, out: &mut Accepted, p: Peer) {
        self.refuse(
            out,
            format!(
                "refused a connection from pid {} (uid {}): not a process of this run",
                p.pid, p.uid
            ),
        );
    }

    /// Counts a refusal; names it while few were named.
    fn refuse(&mut self, out: &mut Accepted, why: String) {
        self.refused += 1;
        if self.refused <= NAMED_REFUSALS {
            out.notes.push(why);
        }
    }
}

/// The peer's credentials as the kernel recorded them at `connect`.
pub fn peer(conn: &OwnedFd) -> Option<Peer> {
    // SAFETY: ucred is plain old data.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt into a ucred of `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            &mut cred as *mut libc::ucred as *mut libc::c_void,
            &mut len,
        )
    };
    (rc == 0 && cred.pid > 0).then_some(Peer {
        pid: cred.pid,
        uid: cred.uid,
    })
}

/// The process a pidfd refers to (`Pid:` of its fdinfo: 0 or -1 once it
/// ended); `None` for a descriptor that is no pidfd.
fn pidfd_pid(fd: &OwnedFd) -> Option<i32> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd())).ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("Pid:"))?
        .trim()
        .parse()
        .ok()
}

/// What reading a connection found.
enum Received {
    /// No message yet.
    Nothing,
    /// A message of the runtime's shape (the pid in it is only reported).
    Message(Handover),
    /// Something else (closed, wrong size, wrong descriptors).
    Malformed,
}

/// Reads one message with two descriptors, without waiting.
fn receive(conn: &OwnedFd) -> Received {
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
    // SAFETY: a connected socket and a valid message; never waits.
    let n = unsafe {
        libc::recvmsg(
            conn.as_raw_fd(),
            &mut msg,
            libc::MSG_CMSG_CLOEXEC | libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        let e = io::Error::last_os_error().raw_os_error();
        return if e == Some(libc::EAGAIN) || e == Some(libc::EINTR) {
            Received::Nothing
        } else {
            Received::Malformed
        };
    }
    let mut fds = Vec::new();
    // SAFETY: walking the control messages the kernel filled in; every
    // descriptor passed is taken (and closed if unused).
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
    // A longer message is cut to its first 4 bytes and flagged: refused.
    let cut = msg.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0;
    if n != 4 || fds.len() != 2 || cut {
        return Received::Malformed;
    }
    let (Some(pidfd), Some(segment)) = (fds.pop(), fds.pop()) else {
        return Received::Malformed;
    };
    Received::Message(Handover {
        pid: i32::from_le_bytes(pid),
        segment,
        pidfd,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Connects to `listener` as a runtime does (this process is the peer).
    fn connect(listener: &Listener) -> OwnedFd {
        // SAFETY: socket(2) with constant arguments.
        let fd =
            unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) };
        assert!(fd >= 0);
        // SAFETY: a descriptor we just created and own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let (addr, len) = strobe_wire::socket::abstract_address(listener.name()).unwrap();
        // SAFETY: a valid address of `len` bytes.
        let rc = unsafe {
            libc::connect(
                fd.as_raw_fd(),
                &addr as *const libc::sockaddr_un as *const libc::sockaddr,
                len,
            )
        };
        assert_eq!(rc, 0, "{}", io::Error::last_os_error());
        fd
    }

    /// Sends `data` with the descriptors `fds` on `conn`.
    fn send(conn: &OwnedFd, data: &[u8], fds: &[i32]) {
        let mut iov = libc::iovec {
            iov_base: data.as_ptr() as *mut libc::c_void,
            iov_len: data.len(),
        };
        let mut control = [0u64; 8];
        // SAFETY: msghdr is plain old data.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        if !fds.is_empty() {
            let bytes = (fds.len() * 4) as u32;
            msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
            // SAFETY: CMSG_SPACE is a pure computation.
            msg.msg_controllen = unsafe { libc::CMSG_SPACE(bytes) } as usize;
            // SAFETY: the control buffer holds one header with the ints.
            unsafe {
                let cmsg = libc::CMSG_FIRSTHDR(&msg);
                (*cmsg).cmsg_level = libc::SOL_SOCKET;
                (*cmsg).cmsg_type = libc::SCM_RIGHTS;
                (*cmsg).cmsg_len = libc::CMSG_LEN(bytes) as usize;
                std::ptr::copy_nonoverlapping(
                    fds.as_ptr(),
                    libc::CMSG_DATA(cmsg) as *mut i32,
                    fds.len(),
                );
            }
        }
        // SAFETY: a connected socket and a valid message.
        let n = unsafe { libc::sendmsg(conn.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        assert_eq!(n, data.len() as isize, "{}", io::Error::last_os_error());
    }

    /// What a runtime sends: its pid, a segment's descriptor and a pidfd.
    fn hand_over(conn: &OwnedFd, pidfd: &OwnedFd) {
        let segment = std::fs::File::open("/dev/null").unwrap();
        send(
            conn,
            &(std::process::id() as i32).to_le_bytes(),
            &[segment.as_raw_fd(), pidfd.as_raw_fd()],
        );
    }

    fn me() -> Peer {
        Peer {
            pid: std::process::id() as i32,
            // SAFETY: geteuid has no preconditions.
            uid: unsafe { libc::geteuid() },
        }
    }

    fn own_pidfd() -> OwnedFd {
        strobe_core::pidfd::open(std::process::id() as i32).unwrap()
    }

    #[test]
    fn a_members_handover_is_taken_once_its_message_arrives() {
        let mut l = Listener::bind().unwrap();
        assert!(l.idle());
        let conn = connect(&l);
        let out = l.accept(1_000, |p| p == me());
        assert!(out.handovers.is_empty() && out.notes.is_empty());
        assert!(!l.idle(), "waiting for its message");
        let pidfd = own_pidfd();
        hand_over(&conn, &pidfd);
        let out = l.accept(2_000, |_| panic!("a member is not asked again"));
        assert_eq!(out.handovers.len(), 1);
        assert_eq!(out.handovers[0].pid, me().pid);
        assert!(out.notes.is_empty());
        assert!(l.idle());
        assert_eq!(l.refused(), 0);
    }

    #[test]
    fn an_unknown_peer_is_looked_at_again_during_its_grace_then_refused() {
        let mut l = Listener::bind().unwrap();
        let _conn = connect(&l);
        let start = 10_000;
        let out = l.accept(start, |_| false);
        assert!(out.notes.is_empty());
        assert!(!l.idle(), "the run is not over while it is undecided");
        let out = l.accept(start + UNKNOWN_GRACE_NS - 1, |_| false);
        assert!(out.notes.is_empty());
        assert_eq!(l.refused(), 0);
        let out = l.accept(start + UNKNOWN_GRACE_NS, |_| false);
        assert_eq!(l.refused(), 1);
        assert!(l.idle());
        assert_eq!(
            out.notes,
            [format!(
                "refused a connection from pid {} (uid {}): not a process of this run",
                me().pid,
                me().uid
            )]
        );
    }

    #[test]
    fn an_unknown_peer_known_within_its_grace_is_taken() {
        let mut l = Listener::bind().unwrap();
        let conn = connect(&l);
        l.accept(0, |_| false);
        let pidfd = own_pidfd();
        hand_over(&conn, &pidfd);
        // Its parent's announcement was read meanwhile.
        let out = l.accept(UNKNOWN_GRACE_NS - 1, |p| p == me());
        assert_eq!(out.handovers.len(), 1);
        assert!(l.idle());
        assert_eq!(l.refused(), 0);
    }

    #[test]
    fn a_member_that_sends_nothing_is_dropped_at_the_deadline() {
        let mut l = Listener::bind().unwrap();
        let _conn = connect(&l);
        l.accept(5, |_| true);
        let out = l.accept(5 + RECEIVE_DEADLINE_NS - 1, |_| true);
        assert!(out.notes.is_empty());
        assert!(!l.idle());
        let out = l.accept(5 + RECEIVE_DEADLINE_NS, |_| true);
        assert!(l.idle());
        assert_eq!(l.refused(), 1);
        assert_eq!(
            out.notes,
            [format!(
                "closed the connection of pid {}: it sent nothing within 10 s",
                me().pid
            )]
        );
    }

    #[test]
    fn messages_not_of_a_runtimes_shape_are_refused() {
        let pidfd = own_pidfd();
        let null = std::fs::File::open("/dev/null").unwrap();
        let pid = (std::process::id() as i32).to_le_bytes();
        let longer = [pid[0], pid[1], pid[2], pid[3], 0];
        let shapes: [(&[u8], Vec<i32>); 5] = [
            (&pid, vec![]),
            (&pid, vec![null.as_raw_fd()]),
            (b"12", vec![null.as_raw_fd(), pidfd.as_raw_fd()]),
            (&longer, vec![null.as_raw_fd(), pidfd.as_raw_fd()]),
            (
                &pid,
                vec![null.as_raw_fd(), pidfd.as_raw_fd(), null.as_raw_fd()],
            ),
        ];
        for (data, fds) in shapes {
            let mut l = Listener::bind().unwrap();
            let conn = connect(&l);
            send(&conn, data, &fds);
            let out = l.accept(0, |_| true);
            assert!(out.handovers.is_empty(), "{data:?} {fds:?}");
            assert_eq!(
                out.notes,
                [format!(
                    "refused the handover of pid {}: not a runtime's message",
                    me().pid
                )],
                "{data:?} {fds:?}"
            );
            assert!(l.idle());
        }
        // Closed without a word.
        let mut l = Listener::bind().unwrap();
        drop(connect(&l));
        let out = l.accept(0, |_| true);
        assert_eq!(out.notes.len(), 1);
        assert!(out.notes[0].contains("not a runtime's message"));
    }

    #[test]
    fn a_handover_whose_process_descriptor_is_not_the_peers_is_refused() {
        let mut l = Listener::bind().unwrap();
        let conn = connect(&l);
        let null = std::fs::File::open("/dev/null").unwrap();
        let not_a_pidfd: OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
        send(
            &conn,
            &(std::process::id() as i32).to_le_bytes(),
            &[null.as_raw_fd(), not_a_pidfd.as_raw_fd()],
        );
        let out = l.accept(0, |_| true);
        assert!(out.handovers.is_empty());
        assert_eq!(
            out.notes,
            [format!(
                "refused the handover of pid {}: its process descriptor is of no pidfd",
                me().pid
            )]
        );
    }

    #[test]
    fn the_pid_a_message_claims_is_not_the_one_kept() {
        let mut l = Listener::bind().unwrap();
        let conn = connect(&l);
        let null = std::fs::File::open("/dev/null").unwrap();
        let pidfd = own_pidfd();
        send(
            &conn,
            &1i32.to_le_bytes(),
            &[null.as_raw_fd(), pidfd.as_raw_fd()],
        );
        let out = l.accept(0, |p| p.pid != 1);
        assert_eq!(out.handovers.len(), 1);
        assert_eq!(out.handovers[0].pid, me().pid, "the kernel's word");
    }

    #[test]
    fn a_flood_of_unknown_peers_is_bounded_and_named_only_at_first() {
        let mut l = Listener::bind().unwrap();
        let conns: Vec<OwnedFd> = (0..MAX_UNKNOWN + 10).map(|_| connect(&l)).collect();
        let out = l.accept(0, |_| false);
        // Past the bound, refused at once; the first few by name.
        assert_eq!(l.refused(), 10);
        assert_eq!(out.notes.len(), NAMED_REFUSALS as usize);
        let out = l.accept(UNKNOWN_GRACE_NS, |_| false);
        assert_eq!(l.refused(), MAX_UNKNOWN as u64 + 10);
        assert!(out.notes.is_empty(), "only counted now");
        assert!(l.idle());
        drop(conns);
    }

    #[test]
    fn members_waiting_for_their_message_are_bounded() {
        let mut l = Listener::bind().unwrap();
        let conns: Vec<OwnedFd> = (0..MAX_WAITING + 2).map(|_| connect(&l)).collect();
        let out = l.accept(0, |_| true);
        assert_eq!(l.refused(), 2);
        assert_eq!(out.notes.len(), 2);
        assert!(out.notes[0].ends_with(&format!(
            "{MAX_WAITING} connections of the run were already waiting for their message"
        )));
        // The ones kept are still taken once they speak.
        let pidfd = own_pidfd();
        for conn in &conns[..3] {
            hand_over(conn, &pidfd);
        }
        let out = l.accept(1, |_| true);
        assert_eq!(out.handovers.len(), 3);
        assert!(!l.idle());
    }

    #[test]
    fn one_pass_takes_a_bounded_number_of_new_connections() {
        let mut l = Listener::bind().unwrap();
        let n = ACCEPTS_PER_PASS + 5;
        let conns: Vec<OwnedFd> = (0..n).map(|_| connect(&l)).collect();
        // Refused at once (no room for unknown peers): counts the accepted.
        let full = |l: &mut Listener, now| {
            let before = l.refused();
            l.accept(now, |_| false);
            l.refused() - before
        };
        let first = full(&mut l, 0);
        assert_eq!(first, (ACCEPTS_PER_PASS - MAX_UNKNOWN) as u64);
        let second = full(&mut l, 1);
        assert_eq!(second, 5, "the rest on the next pass");
        drop(conns);
    }

    #[test]
    fn a_pidfd_names_its_process_and_other_descriptors_none() {
        let me = std::process::id() as i32;
        let fd = strobe_core::pidfd::open(me).unwrap();
        assert_eq!(pidfd_pid(&fd), Some(me));
        let file: OwnedFd = std::fs::File::open("/proc/self/stat").unwrap().into();
        assert_eq!(pidfd_pid(&file), None);
    }
}
