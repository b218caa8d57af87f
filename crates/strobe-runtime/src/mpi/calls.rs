//! The C wrappers: one `MPI_*` function per recorded call, each calling
//! `PMPI_*` with the caller's arguments and describing the call to a
//! [`Call`].
//!
//! Owns these definitions only. Handles are taken as register-sized
//! values and passed on untouched, so one definition serves Open MPI's and
//! MPICH's interfaces ([`super::abi`]). A wrapper forwards at once when
//! nothing is recorded; otherwise it never changes an argument except a
//! status the program asked MPI to ignore (given a private one) and never
//! changes the result.

use super::abi::{abi, Handle, STATUS_ROOM};
use super::{
    clock_sync, comm_freed, comm_made, function, keeping_errno, receive_pending, type_bytes,
    window_freed, window_made, Call, Waiting,
};
use crate::interpose::{real, RealFn};
use libc::{c_char, c_int, c_void};
use std::ffi::CStr;

type Buf = *const c_void;
type Out = *mut u8;
type Counts = *const c_int;

/// Defines `MPI_$name` calling `PMPI_$name`: `pre` runs after the call
/// began being recorded and before the library is called (it may shadow
/// an argument, only to replace an ignored status), `post` after a
/// successful return, with `errno` kept.
macro_rules! mpi {
    ($name:ident, fn($($a:ident: $t:ty),* $(,)?), |$c:ident| { $($pre:tt)* } => { $($post:tt)* }) => {
        /// Records the call as a region (see the module documentation).
        ///
        /// # Safety
        /// MPI's contract for this function.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($a: $t),*) -> c_int {
            static REAL: RealFn = RealFn::new(
                // SAFETY: a NUL-terminated literal.
                unsafe { CStr::from_bytes_with_nul_unchecked(concat!("P", stringify!($name), "\0").as_bytes()) },
            );
            const FUNCTION: u16 = function(stringify!($name));
            let real_fn = real!(REAL as fn($($t),*) -> c_int);
            #[allow(unused_mut)]
            let Some(mut $c) = Call::enter(FUNCTION) else {
                // SAFETY: forwarding the caller's arguments unchanged.
                return unsafe { real_fn($($a),*) };
            };
            $($pre)*
            // SAFETY: the caller's arguments (an ignored status replaced by
            // a private one of the interface's size).
            let rc = unsafe { real_fn($($a),*) };
            $c.returned();
            keeping_errno(|| {
                if rc == 0 {
                    $($post)*
                }
                $c.emit();
            });
            rc
        }
    };
}

/// Room for a status the program ignores, aligned for any field.
type StatusRoom = [u64; STATUS_ROOM / 8];

/// `status`, or `room` when the program passed `MPI_STATUS_IGNORE`.
fn status_or(status: Out, room: &mut StatusRoom) -> Out {
    if abi().ignored(status) {
        room.as_mut_ptr() as Out
    } else {
        status
    }
}

/// Sum of `n` counts (0 for a null array).
///
/// # Safety
/// `counts` points to `n` readable ints, or is null.
unsafe fn sum(counts: Counts, n: i32) -> u64 {
    if counts.is_null() {
        return 0;
    }
    (0..usize::try_from(n).unwrap_or(0))
        // SAFETY: contract.
        .map(|i| u64::try_from(unsafe { *counts.add(i) }).unwrap_or(0))
        .sum()
}

/// The count at index `i` (0 for a null array or a negative index).
///
/// # Safety
/// As [`sum`], with `i < n`.
unsafe fn at(counts: Counts, i: i32) -> c_int {
    match usize::try_from(i) {
        // SAFETY: contract.
        Ok(i) if !counts.is_null() => unsafe { *counts.add(i) },
        _ => 0,
    }
}

// Point to point.

mpi!(MPI_Send, fn(buf: Buf, count: c_int, dt: Handle, dest: c_int, tag: c_int, comm: Handle),
    |c| {} => { c.send(count, dt, dest, tag, comm); });
mpi!(MPI_Ssend, fn(buf: Buf, count: c_int, dt: Handle, dest: c_int, tag: c_int, comm: Handle),
    |c| {} => { c.send(count, dt, dest, tag, comm); });
mpi!(MPI_Bsend, fn(buf: Buf, count: c_int, dt: Handle, dest: c_int, tag: c_int, comm: Handle),
    |c| {} => { c.send(count, dt, dest, tag, comm); });
mpi!(MPI_Rsend, fn(buf: Buf, count: c_int, dt: Handle, dest: c_int, tag: c_int, comm: Handle),
    |c| {} => { c.send(count, dt, dest, tag, comm); });
mpi!(MPI_Recv,
fn(buf: Buf, count: c_int, dt: Handle, source: c_int, tag: c_int, comm: Handle, status: Out),
|c| {
    let mut room: StatusRoom = [0; STATUS_ROOM / 8];
    let status = status_or(status, &mut room);
} => {
    let info = c.on(comm);
    // SAFETY: the library filled the status of a successful receive.
    unsafe { c.received(info, status) };
});
mpi!(MPI_Sendrecv,
fn(sbuf: Buf, scount: c_int, sdt: Handle, dest: c_int, stag: c_int, rbuf: Buf,
   rcount: c_int, rdt: Handle, source: c_int, rtag: c_int, comm: Handle, status: Out),
|c| {
    let mut room: StatusRoom = [0; STATUS_ROOM / 8];
    let status = status_or(status, &mut room);
} => {
    c.send(scount, sdt, dest, stag, comm);
    let info = c.on(comm);
    // SAFETY: as for MPI_Recv.
    unsafe { c.received(info, status) };
});
mpi!(MPI_Sendrecv_replace,
fn(buf: Buf, count: c_int, dt: Handle, dest: c_int, stag: c_int, source: c_int,
   rtag: c_int, comm: Handle, status: Out),
|c| {
    let mut room: StatusRoom = [0; STATUS_ROOM / 8];
    let status = status_or(status, &mut room);
} => {
    c.send(count, dt, dest, stag, comm);
    let info = c.on(comm);
    // SAFETY: as for MPI_Recv.
    unsafe { c.received(info, status) };
});
mpi!(MPI_Probe, fn(source: c_int, tag: c_int, comm: Handle, status: Out),
|c| {
    let mut room: StatusRoom = [0; STATUS_ROOM / 8];
    let status = status_or(status, &mut room);
} => {
    c.on(comm);
    // SAFETY: the library filled the status of a successful probe.
    let (source, tag) = unsafe { abi().source_and_tag(status) };
    c.peer(source);
    c.tag(tag);
});
mpi!(MPI_Isend,
    fn(buf: Buf, count: c_int, dt: Handle, dest: c_int, tag: c_int, comm: Handle, req: Out),
    |c| {} => { c.send(count, dt, dest, tag, comm); });
mpi!(MPI_Issend,
    fn(buf: Buf, count: c_int, dt: Handle, dest: c_int, tag: c_int, comm: Handle, req: Out),
    |c| {} => { c.send(count, dt, dest, tag, comm); });
mpi!(MPI_Ibsend,
    fn(buf: Buf, count: c_int, dt: Handle, dest: c_int, tag: c_int, comm: Handle, req: Out),
    |c| {} => { c.send(count, dt, dest, tag, comm); });
mpi!(MPI_Irsend,
    fn(buf: Buf, count: c_int, dt: Handle, dest: c_int, tag: c_int, comm: Handle, req: Out),
    |c| {} => { c.send(count, dt, dest, tag, comm); });
mpi!(MPI_Irecv,
fn(buf: Buf, count: c_int, dt: Handle, source: c_int, tag: c_int, comm: Handle, req: Out),
|c| {} => {
    let info = c.on(comm);
    if source != abi().any_source {
        c.peer(source);
    }
    c.tag(tag);
    // SAFETY: the library wrote the new request.
    receive_pending(unsafe { abi().read_handle(req) }, info);
});

// Completion.

mpi!(MPI_Wait, fn(req: Out, status: Out),
|c| {
    // SAFETY: MPI's contract: one request.
    let mut w = unsafe { Waiting::new(req, 1, status, true) };
    let status = w.statuses();
} => {
    w.all_done(&mut c);
});
mpi!(MPI_Waitall, fn(count: c_int, reqs: Out, all: Out),
|c| {
    // SAFETY: MPI's contract: `count` requests.
    let mut w = unsafe { Waiting::new(reqs, count, all, false) };
    let all = w.statuses();
} => {
    w.all_done(&mut c);
});
mpi!(MPI_Waitany, fn(count: c_int, reqs: Out, index: *mut c_int, status: Out),
|c| {
    // SAFETY: MPI's contract: `count` requests.
    let mut w = unsafe { Waiting::new(reqs, count, status, true) };
    let status = w.statuses();
} => {
    // SAFETY: the library wrote the index.
    let done = usize::try_from(unsafe { *index }).ok();
    w.done(&mut c, done.into_iter(), true);
});
mpi!(MPI_Waitsome,
fn(count: c_int, reqs: Out, outcount: *mut c_int, indices: *mut c_int, all: Out),
|c| {
    // SAFETY: MPI's contract: `count` requests.
    let mut w = unsafe { Waiting::new(reqs, count, all, false) };
    let all = w.statuses();
} => {
    // SAFETY: the library wrote `outcount` indices.
    let done = unsafe { completed_indices(outcount, indices) };
    w.done(&mut c, done.into_iter(), true);
});
mpi!(MPI_Test, fn(req: Out, flag: *mut c_int, status: Out),
|c| {
    // SAFETY: MPI's contract: one request.
    let mut w = unsafe { Waiting::new(req, 1, status, true) };
    let status = w.statuses();
} => {
    // SAFETY: the library wrote the flag.
    if unsafe { *flag } != 0 {
        w.all_done(&mut c);
    }
});
mpi!(MPI_Testall, fn(count: c_int, reqs: Out, flag: *mut c_int, all: Out),
|c| {
    // SAFETY: MPI's contract: `count` requests.
    let mut w = unsafe { Waiting::new(reqs, count, all, false) };
    let all = w.statuses();
} => {
    // SAFETY: the library wrote the flag.
    if unsafe { *flag } != 0 {
        w.all_done(&mut c);
    }
});
mpi!(MPI_Testany, fn(count: c_int, reqs: Out, index: *mut c_int, flag: *mut c_int, status: Out),
|c| {
    // SAFETY: MPI's contract: `count` requests.
    let mut w = unsafe { Waiting::new(reqs, count, status, true) };
    let status = w.statuses();
} => {
    // SAFETY: the library wrote the flag and the index.
    let done = (unsafe { *flag } != 0).then(|| usize::try_from(unsafe { *index }).ok());
    w.done(&mut c, done.flatten().into_iter(), true);
});
mpi!(MPI_Testsome,
fn(count: c_int, reqs: Out, outcount: *mut c_int, indices: *mut c_int, all: Out),
|c| {
    // SAFETY: MPI's contract: `count` requests.
    let mut w = unsafe { Waiting::new(reqs, count, all, false) };
    let all = w.statuses();
} => {
    // SAFETY: the library wrote `outcount` indices.
    let done = unsafe { completed_indices(outcount, indices) };
    w.done(&mut c, done.into_iter(), true);
});

/// The indices `MPI_Waitsome`/`MPI_Testsome` completed.
///
/// # Safety
/// `outcount` was written by the library and `indices` holds that many.
unsafe fn completed_indices(outcount: *const c_int, indices: *const c_int) -> Vec<usize> {
    // SAFETY: contract.
    let n = unsafe { *outcount };
    (0..usize::try_from(n).unwrap_or(0))
        // SAFETY: contract.
        .filter_map(|i| usize::try_from(unsafe { *indices.add(i) }).ok())
        .collect()
}

// Collectives.

mpi!(MPI_Barrier, fn(comm: Handle), |c| {} => { c.on(comm); });
mpi!(MPI_Bcast, fn(buf: Buf, count: c_int, dt: Handle, root: c_int, comm: Handle),
|c| {} => {
    c.on(comm);
    c.bytes(type_bytes(count, dt));
    c.root(root);
});
mpi!(MPI_Reduce,
fn(sbuf: Buf, rbuf: Buf, count: c_int, dt: Handle, op: Handle, root: c_int, comm: Handle),
|c| {} => {
    c.on(comm);
    c.bytes(type_bytes(count, dt));
    c.root(root);
});
mpi!(MPI_Allreduce, fn(sbuf: Buf, rbuf: Buf, count: c_int, dt: Handle, op: Handle, comm: Handle),
|c| {} => {
    c.on(comm);
    c.bytes(type_bytes(count, dt));
});
mpi!(MPI_Scan, fn(sbuf: Buf, rbuf: Buf, count: c_int, dt: Handle, op: Handle, comm: Handle),
|c| {} => {
    c.on(comm);
    c.bytes(type_bytes(count, dt));
});
mpi!(MPI_Exscan, fn(sbuf: Buf, rbuf: Buf, count: c_int, dt: Handle, op: Handle, comm: Handle),
|c| {} => {
    c.on(comm);
    c.bytes(type_bytes(count, dt));
});
mpi!(MPI_Gather,
fn(sbuf: Buf, scount: c_int, sdt: Handle, rbuf: Buf, rcount: c_int, rdt: Handle,
   root: c_int, comm: Handle),
|c| {} => {
    let info = c.on(comm);
    c.root(root);
    if sbuf as usize != abi().in_place {
        c.bytes(type_bytes(scount, sdt));
    }
    if info.rank == root {
        c.recv_bytes(type_bytes(rcount, rdt) * u64::try_from(info.size).unwrap_or(0));
    }
});
mpi!(MPI_Gatherv,
fn(sbuf: Buf, scount: c_int, sdt: Handle, rbuf: Buf, rcounts: Counts, displs: Counts,
   rdt: Handle, root: c_int, comm: Handle),
|c| {} => {
    let info = c.on(comm);
    c.root(root);
    if sbuf as usize != abi().in_place {
        c.bytes(type_bytes(scount, sdt));
    }
    if info.rank == root {
        // SAFETY: at the root, MPI's contract: one count per rank.
        c.recv_bytes(unsafe { sum(rcounts, info.size) } * type_bytes(1, rdt));
    }
});
mpi!(MPI_Scatter,
fn(sbuf: Buf, scount: c_int, sdt: Handle, rbuf: Buf, rcount: c_int, rdt: Handle,
   root: c_int, comm: Handle),
|c| {} => {
    let info = c.on(comm);
    c.root(root);
    if info.rank == root {
        c.bytes(type_bytes(scount, sdt) * u64::try_from(info.size).unwrap_or(0));
    }
    if rbuf as usize != abi().in_place {
        c.recv_bytes(type_bytes(rcount, rdt));
    }
});
mpi!(MPI_Scatterv,
fn(sbuf: Buf, scounts: Counts, displs: Counts, sdt: Handle, rbuf: Buf, rcount: c_int,
   rdt: Handle, root: c_int, comm: Handle),
|c| {} => {
    let info = c.on(comm);
    c.root(root);
    if info.rank == root {
        // SAFETY: at the root, MPI's contract: one count per rank.
        c.bytes(unsafe { sum(scounts, info.size) } * type_bytes(1, sdt));
    }
    if rbuf as usize != abi().in_place {
        c.recv_bytes(type_bytes(rcount, rdt));
    }
});
mpi!(MPI_Allgather,
fn(sbuf: Buf, scount: c_int, sdt: Handle, rbuf: Buf, rcount: c_int, rdt: Handle,
   comm: Handle),
|c| {} => {
    let info = c.on(comm);
    if sbuf as usize != abi().in_place {
        c.bytes(type_bytes(scount, sdt));
    }
    c.recv_bytes(type_bytes(rcount, rdt) * u64::try_from(info.size).unwrap_or(0));
});
mpi!(MPI_Allgatherv,
fn(sbuf: Buf, scount: c_int, sdt: Handle, rbuf: Buf, rcounts: Counts, displs: Counts,
   rdt: Handle, comm: Handle),
|c| {} => {
    let info = c.on(comm);
    if sbuf as usize != abi().in_place {
        c.bytes(type_bytes(scount, sdt));
    }
    // SAFETY: MPI's contract: one count per rank.
    c.recv_bytes(unsafe { sum(rcounts, info.size) } * type_bytes(1, rdt));
});
mpi!(MPI_Alltoall,
fn(sbuf: Buf, scount: c_int, sdt: Handle, rbuf: Buf, rcount: c_int, rdt: Handle,
   comm: Handle),
|c| {} => {
    let info = c.on(comm);
    let ranks = u64::try_from(info.size).unwrap_or(0);
    if sbuf as usize != abi().in_place {
        c.bytes(type_bytes(scount, sdt) * ranks);
    }
    c.recv_bytes(type_bytes(rcount, rdt) * ranks);
});
mpi!(MPI_Alltoallv,
fn(sbuf: Buf, scounts: Counts, sdispls: Counts, sdt: Handle, rbuf: Buf, rcounts: Counts,
   rdispls: Counts, rdt: Handle, comm: Handle),
|c| {} => {
    let info = c.on(comm);
    if sbuf as usize != abi().in_place {
        // SAFETY: MPI's contract: one count per rank.
        c.bytes(unsafe { sum(scounts, info.size) } * type_bytes(1, sdt));
    }
    // SAFETY: as above.
    c.recv_bytes(unsafe { sum(rcounts, info.size) } * type_bytes(1, rdt));
});
mpi!(MPI_Reduce_scatter,
fn(sbuf: Buf, rbuf: Buf, rcounts: Counts, dt: Handle, op: Handle, comm: Handle),
|c| {} => {
    let info = c.on(comm);
    // SAFETY: MPI's contract: one count per rank.
    c.bytes(unsafe { sum(rcounts, info.size) } * type_bytes(1, dt));
    // SAFETY: as above; this rank's index is below the size.
    c.recv_bytes(type_bytes(unsafe { at(rcounts, info.rank) }, dt));
});
mpi!(MPI_Reduce_scatter_block,
fn(sbuf: Buf, rbuf: Buf, rcount: c_int, dt: Handle, op: Handle, comm: Handle),
|c| {} => {
    let info = c.on(comm);
    c.bytes(type_bytes(rcount, dt) * u64::try_from(info.size).unwrap_or(0));
    c.recv_bytes(type_bytes(rcount, dt));
});
mpi!(MPI_Ibarrier, fn(comm: Handle, req: Out), |c| {} => { c.on(comm); });
mpi!(MPI_Ibcast, fn(buf: Buf, count: c_int, dt: Handle, root: c_int, comm: Handle, req: Out),
|c| {} => {
    c.on(comm);
    c.bytes(type_bytes(count, dt));
    c.root(root);
});
mpi!(MPI_Ireduce,
fn(sbuf: Buf, rbuf: Buf, count: c_int, dt: Handle, op: Handle, root: c_int, comm: Handle,
   req: Out),
|c| {} => {
    c.on(comm);
    c.bytes(type_bytes(count, dt));
    c.root(root);
});
mpi!(MPI_Iallreduce,
fn(sbuf: Buf, rbuf: Buf, count: c_int, dt: Handle, op: Handle, comm: Handle, req: Out),
|c| {} => {
    c.on(comm);
    c.bytes(type_bytes(count, dt));
});

// One-sided.

mpi!(MPI_Win_create,
fn(base: Buf, size: isize, disp_unit: c_int, info: Handle, comm: Handle, win: Out),
|c| {} => {
    let on = c.on(comm);
    c.bytes(u64::try_from(size).unwrap_or(0));
    // SAFETY: the library wrote the new window.
    window_made(unsafe { abi().read_handle(win) }, on);
});
mpi!(MPI_Win_allocate,
fn(size: isize, disp_unit: c_int, info: Handle, comm: Handle, base: *mut c_void, win: Out),
|c| {} => {
    let on = c.on(comm);
    c.bytes(u64::try_from(size).unwrap_or(0));
    // SAFETY: the library wrote the new window.
    window_made(unsafe { abi().read_handle(win) }, on);
});
mpi!(MPI_Win_free, fn(win: Out),
    |c| {
        // SAFETY: MPI's contract: a window handle to free.
        let freed = unsafe { abi().read_handle(win) };
        c.on_window(freed);
    } => { window_freed(freed); });
mpi!(MPI_Put,
fn(origin: Buf, ocount: c_int, odt: Handle, target: c_int, disp: isize, tcount: c_int,
   tdt: Handle, win: Handle),
|c| {} => {
    c.on_window(win);
    c.bytes(type_bytes(ocount, odt));
    c.peer(target);
});
mpi!(MPI_Get,
fn(origin: Buf, ocount: c_int, odt: Handle, target: c_int, disp: isize, tcount: c_int,
   tdt: Handle, win: Handle),
|c| {} => {
    c.on_window(win);
    c.recv_bytes(type_bytes(ocount, odt));
    c.peer(target);
});
mpi!(MPI_Accumulate,
fn(origin: Buf, ocount: c_int, odt: Handle, target: c_int, disp: isize, tcount: c_int,
   tdt: Handle, op: Handle, win: Handle),
|c| {} => {
    c.on_window(win);
    c.bytes(type_bytes(ocount, odt));
    c.peer(target);
});
mpi!(MPI_Win_fence, fn(assert: c_int, win: Handle), |c| {} => { c.on_window(win); });
mpi!(MPI_Win_lock, fn(lock_type: c_int, rank: c_int, assert: c_int, win: Handle),
|c| {} => {
    c.on_window(win);
    c.peer(rank);
});
mpi!(MPI_Win_unlock, fn(rank: c_int, win: Handle), |c| {} => {
    c.on_window(win);
    c.peer(rank);
});
mpi!(MPI_Win_flush, fn(rank: c_int, win: Handle), |c| {} => {
    c.on_window(win);
    c.peer(rank);
});

// Communicators.

mpi!(MPI_Comm_dup, fn(comm: Handle, made: Out), |c| {} => {
    c.on(comm);
    // SAFETY: the library wrote the new communicator.
    comm_made(comm, unsafe { abi().read_handle(made) });
});
mpi!(MPI_Comm_split, fn(comm: Handle, color: c_int, key: c_int, made: Out), |c| {} => {
    c.on(comm);
    // SAFETY: the library wrote the new communicator.
    comm_made(comm, unsafe { abi().read_handle(made) });
});
mpi!(MPI_Comm_create, fn(comm: Handle, group: Handle, made: Out), |c| {} => {
    c.on(comm);
    // SAFETY: the library wrote the new communicator.
    comm_made(comm, unsafe { abi().read_handle(made) });
});
mpi!(MPI_Comm_free, fn(comm: Out),
    |c| {
        // SAFETY: MPI's contract: a communicator handle to free.
        let freed = unsafe { abi().read_handle(comm) };
        c.on(freed);
    } => { comm_freed(freed); });

// Start and end.

mpi!(MPI_Init, fn(argc: *mut c_int, argv: *mut *mut *mut c_char), |c| {} => {
    c.on(abi().comm_world);
    clock_sync::at_init();
});
mpi!(MPI_Init_thread,
fn(argc: *mut c_int, argv: *mut *mut *mut c_char, required: c_int, provided: *mut c_int),
|c| {} => {
    c.on(abi().comm_world);
    clock_sync::at_init();
});

static REAL_TYPE_FREE: RealFn = RealFn::new(c"PMPI_Type_free");

/// Not recorded: forwards, and forgets the sizes threads cached (the
/// handle may come back for another type).
///
/// # Safety
/// MPI's contract for `MPI_Type_free`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_free(datatype: Out) -> c_int {
    let real_fn = real!(REAL_TYPE_FREE as fn(Out) -> c_int);
    // SAFETY: forwarding the caller's argument unchanged.
    let rc = unsafe { real_fn(datatype) };
    super::type_freed();
    rc
}

static REAL_FINALIZE: RealFn = RealFn::new(c"PMPI_Finalize");

/// Compares clocks with rank 0 a last time, then records `MPI_Finalize`.
///
/// # Safety
/// MPI's contract for `MPI_Finalize`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Finalize() -> c_int {
    const FUNCTION: u16 = function("MPI_Finalize");
    let real_fn = real!(REAL_FINALIZE as fn() -> c_int);
    if Call::recording() {
        keeping_errno(clock_sync::at_finalize);
    }
    let Some(mut c) = Call::enter(FUNCTION) else {
        // SAFETY: no arguments.
        return unsafe { real_fn() };
    };
    // SAFETY: no arguments.
    let rc = unsafe { real_fn() };
    c.returned();
    keeping_errno(|| c.emit());
    rc
}
