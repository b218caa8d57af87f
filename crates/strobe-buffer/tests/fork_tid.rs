//! A forked child's records carry the child's own kernel thread id, even
//! when the forking thread had already produced records (and so had its tid
//! looked up) in the parent. Runs in its own test process: the child of
//! `fork()` only has the forking thread, so no other test may hold a lock
//! or be inside `malloc` when it forks.

use std::sync::atomic::{AtomicU32, Ordering};
use strobe_buffer::{CallbackRecord, Context, Kind, Phase, UserData};

/// The `tid` of the last enter record the callback saw.
static LAST_TID: AtomicU32 = AtomicU32::new(0);

fn own_tid() -> u32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    let tid = unsafe { libc::gettid() };
    u32::try_from(tid).expect("kernel thread ids are positive")
}

/// Produces one callback tracing record on the calling thread and returns
/// the tid it carried (0 when no record was produced). Neither allocates
/// nor locks, so the child of `fork()` can call it.
fn record_tid(ctx: &Context) -> u32 {
    LAST_TID.store(0, Ordering::Relaxed);
    ctx.callback_enter(Kind::LibraryCall, 1, b"").exit(b"");
    LAST_TID.load(Ordering::Relaxed)
}

#[test]
fn records_of_a_forked_child_carry_the_childs_tid() {
    let ctx = Context::create().unwrap();
    ctx.configure_callback_tracing(
        Kind::LibraryCall,
        None,
        |r: &CallbackRecord, _: &mut UserData| {
            if r.phase() == Phase::Enter {
                LAST_TID.store(r.tid, Ordering::Relaxed);
            }
        },
    )
    .unwrap();
    ctx.start().unwrap();

    // The parent's thread produces a record first (an old per-thread cache
    // of the tid is filled here).
    let parent_tid = own_tid();
    assert_eq!(record_tid(&ctx), parent_tid);

    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe writes.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let [read_fd, write_fd] = fds;

    // SAFETY: the child only produces a record (no allocation, no lock),
    // writes to the pipe and leaves with `_exit`, never returning into the
    // test harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let seen = record_tid(&ctx);
        let own = own_tid();
        let mut msg = [0u8; 8];
        msg[..4].copy_from_slice(&seen.to_ne_bytes());
        msg[4..].copy_from_slice(&own.to_ne_bytes());
        // SAFETY: `msg` is 8 readable bytes; write and _exit are
        // async-signal-safe, as the child of a multithreaded fork needs.
        unsafe {
            let written = libc::write(write_fd, msg.as_ptr().cast(), msg.len());
            libc::_exit(if written == 8 { 0 } else { 1 });
        }
    }

    // SAFETY: closing the parent's copy of the write end, which it owns.
    unsafe { libc::close(write_fd) };
    let mut msg = [0u8; 8];
    let mut got = 0;
    while got < msg.len() {
        // SAFETY: reading into the unread tail of `msg`.
        let n = unsafe { libc::read(read_fd, msg[got..].as_mut_ptr().cast(), msg.len() - got) };
        if n <= 0 {
            break;
        }
        got += n as usize;
    }
    // SAFETY: closing the read end, which this test owns.
    unsafe { libc::close(read_fd) };
    let mut status = 0;
    // SAFETY: `pid` is our child; `status` is a valid out pointer.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child failed: status {status:#x}"
    );
    assert_eq!(got, msg.len(), "child sent no result");

    let seen = u32::from_ne_bytes(msg[..4].try_into().unwrap());
    let child_tid = u32::from_ne_bytes(msg[4..].try_into().unwrap());
    assert_ne!(child_tid, parent_tid);
    assert_ne!(
        seen, parent_tid,
        "the child's record carries the parent's tid"
    );
    assert_eq!(seen, child_tid, "the child's record carries its own tid");

    // The parent still gets its own tid.
    assert_eq!(record_tid(&ctx), parent_tid);
}
