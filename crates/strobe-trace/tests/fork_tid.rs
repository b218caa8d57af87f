//! The recorder's records made in a forked child carry the child's own
//! kernel thread id, even when the forking thread had already recorded (and
//! so had its tid looked up) in the parent. Runs in its own test process:
//! the child of `fork()` only has the forking thread, so no other test may
//! hold a lock or be inside `malloc` when it forks.

use std::sync::Arc;

use strobe_trace::recorder::{Recorder, TraceRecord};
use strobe_trace::types::trace_point;
use strobe_trace::{Framework, PayloadSpec};

fn own_tid() -> u64 {
    // SAFETY: gettid has no preconditions and cannot fail.
    let tid = unsafe { libc::gettid() };
    u64::try_from(tid).expect("kernel thread ids are positive")
}

#[test]
fn records_of_a_forked_child_carry_the_childs_tid() {
    let fw = Framework::new();
    let rec = Recorder::new(16);
    fw.add_subscriber(Arc::new(rec.clone()));
    let s = fw.initialize_stream(b"fork", 1, 0, b"1").unwrap();
    let (ev, _) = fw.make_event(&PayloadSpec::named("fork"), 0, 0).unwrap();
    let record = |instance: u64| {
        fw.notify(
            s,
            trace_point::TASK_BEGIN,
            None,
            Some(ev),
            instance,
            std::ptr::null(),
        )
        .unwrap();
    };
    // Room for every drain below, so the child never allocates.
    let mut out: Vec<TraceRecord> = Vec::with_capacity(16);

    // The parent's thread records first (this allocates its ring, and an
    // old per-thread cache of the tid is filled here).
    let parent_tid = own_tid();
    record(1);
    assert_eq!(rec.drain(&mut out), 1);
    assert_eq!(out[0].thread, parent_tid);
    out.clear();

    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe writes.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let [read_fd, write_fd] = fds;

    // SAFETY: the child only records (into the ring its thread already
    // has), drains into `out`'s reserved capacity, writes to the pipe and
    // leaves with `_exit`, never returning into the test harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        record(2);
        let drained = rec.drain(&mut out) as u64;
        let seen = out.first().map_or(0, |r| r.thread);
        let mut msg = [0u8; 24];
        msg[..8].copy_from_slice(&drained.to_ne_bytes());
        msg[8..16].copy_from_slice(&seen.to_ne_bytes());
        msg[16..].copy_from_slice(&own_tid().to_ne_bytes());
        // SAFETY: `msg` is 24 readable bytes; write and _exit are
        // async-signal-safe, as the child of a multithreaded fork needs.
        unsafe {
            let written = libc::write(write_fd, msg.as_ptr().cast(), msg.len());
            libc::_exit(if written == 24 { 0 } else { 1 });
        }
    }

    // SAFETY: closing the parent's copy of the write end, which it owns.
    unsafe { libc::close(write_fd) };
    let mut msg = [0u8; 24];
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

    let word = |i: usize| u64::from_ne_bytes(msg[i * 8..i * 8 + 8].try_into().unwrap());
    let (drained, seen, child_tid) = (word(0), word(1), word(2));
    assert_eq!(drained, 1, "the child recorded once");
    assert_ne!(child_tid, parent_tid);
    assert_ne!(
        seen, parent_tid,
        "the child's record carries the parent's tid"
    );
    assert_eq!(seen, child_tid, "the child's record carries its own tid");

    // The parent still records its own tid.
    record(3);
    assert_eq!(rec.drain(&mut out), 1);
    assert_eq!(out[0].thread, parent_tid);
}
