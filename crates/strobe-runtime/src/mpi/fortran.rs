//! The Fortran wrappers (`mpi_send_`, … as gfortran names them): Open
//! MPI's Fortran bindings call `PMPI_` C functions directly, so the C
//! wrappers never see a Fortran program's calls; these record them.
//!
//! Owns these definitions only. Every argument is a pointer (Fortran
//! passes by reference) and is forwarded untouched to the library's
//! `pmpi_*_`; handles are converted with `PMPI_*_f2c` only to describe the
//! call. Under MPICH's interface the Fortran bindings call the C `MPI_`
//! functions, which record the call: these wrappers then only forward.
//! Statuses are not read (Fortran's "ignore" sentinel is not portable to
//! find): a receive names its peer and tag, and pairs with its send, when
//! the program gave them explicitly; a wildcard receive is recorded
//! without them.

use super::abi::{abi, Handle};
use super::{comm, function, keeping_errno, message_key, type_bytes, Call};
use crate::interpose::{real, RealFn};
use libc::c_int;
use std::ffi::CStr;

type F = *const c_int;
type Buf = *const libc::c_void;

static COMM_F2C: RealFn = RealFn::new(c"PMPI_Comm_f2c");
static TYPE_F2C: RealFn = RealFn::new(c"PMPI_Type_f2c");

/// The C handle of Fortran communicator `f`.
///
/// # Safety
/// `f` points to a Fortran communicator handle.
unsafe fn c_comm(f: F) -> Handle {
    let f2c = real!(COMM_F2C as fn(c_int) -> Handle);
    // SAFETY: contract; the conversion has no other precondition.
    unsafe { f2c(*f) }
}

/// Bytes of `*count` elements of Fortran datatype `*dt`.
///
/// # Safety
/// Both point to Fortran integers.
unsafe fn bytes(count: F, dt: F) -> u64 {
    let f2c = real!(TYPE_F2C as fn(c_int) -> Handle);
    // SAFETY: contract.
    unsafe { type_bytes(*count, f2c(*dt)) }
}

/// Defines Fortran `$name` calling `pmpi_$name`, recorded as `$c_name`
/// under Open MPI's interface; `post` runs when `*ierr` is 0.
macro_rules! fortran {
    ($name:ident = $c_name:literal, fn($($a:ident: $t:ty),* $(,)?) $ierr:ident, |$c:ident| { $($post:tt)* }) => {
        /// Records the call as a region (see the module documentation).
        ///
        /// # Safety
        /// MPI's contract for this Fortran binding.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($a: $t),*) {
            static REAL: RealFn = RealFn::new(
                // SAFETY: a NUL-terminated literal.
                unsafe { CStr::from_bytes_with_nul_unchecked(concat!("p", stringify!($name), "\0").as_bytes()) },
            );
            const FUNCTION: u16 = function($c_name);
            let real_fn = real!(REAL as fn($($t),*) -> ());
            let call = if abi().open_mpi { Call::enter(FUNCTION) } else { None };
            let Some(mut $c) = call else {
                // SAFETY: forwarding the caller's arguments unchanged.
                return unsafe { real_fn($($a),*) };
            };
            // SAFETY: forwarding the caller's arguments unchanged.
            unsafe { real_fn($($a),*) };
            $c.returned();
            keeping_errno(|| {
                // SAFETY: every binding's last argument is the error code
                // the library just wrote.
                if unsafe { *$ierr } == 0 {
                    $($post)*
                }
                $c.emit();
            });
        }
    };
}

/// A Fortran send of `count` × `dt` to `dest` with `tag` on `comm`.
///
/// # Safety
/// All point to Fortran integers of a successful send.
unsafe fn sent(c: &mut Call, count: F, dt: F, dest: F, tag: F, comm: F) {
    // SAFETY: contract.
    unsafe {
        c.send_bytes(bytes(count, dt), *dest, *tag, c_comm(comm));
    }
}

/// A Fortran receive from `source` with `tag` on `comm`: paired with its
/// send when both were given explicitly.
///
/// # Safety
/// All point to Fortran integers of a successful receive.
unsafe fn received(c: &mut Call, count: F, dt: F, source: F, tag: F, comm_f: F) {
    let a = abi();
    // SAFETY: contract.
    let (n, on, source, tag) = unsafe { (bytes(count, dt), c_comm(comm_f), *source, *tag) };
    let info = comm(on);
    c.on(on);
    c.recv_bytes(n);
    if source >= 0 && source != a.any_source && source != a.proc_null && tag != a.any_tag {
        c.peer(source);
        c.tag(tag);
        c.flow_in(message_key(info, source, info.rank, tag, false));
    }
}

fortran!(
    mpi_send_ = "MPI_Send",
    fn(buf: Buf, count: F, dt: F, dest: F, tag: F, comm: F, ierr: *mut c_int) ierr,
    |c| {
        // SAFETY: the binding's arguments after a successful send.
        unsafe { sent(&mut c, count, dt, dest, tag, comm) };
    }
);
fortran!(
    mpi_ssend_ = "MPI_Ssend",
    fn(buf: Buf, count: F, dt: F, dest: F, tag: F, comm: F, ierr: *mut c_int) ierr,
    |c| {
        // SAFETY: as above.
        unsafe { sent(&mut c, count, dt, dest, tag, comm) };
    }
);
fortran!(
    mpi_isend_ = "MPI_Isend",
    fn(buf: Buf, count: F, dt: F, dest: F, tag: F, comm: F, req: *mut c_int, ierr: *mut c_int) ierr,
    |c| {
        // SAFETY: as above.
        unsafe { sent(&mut c, count, dt, dest, tag, comm) };
    }
);
fortran!(
    mpi_recv_ = "MPI_Recv",
    fn(buf: Buf, count: F, dt: F, source: F, tag: F, comm: F, status: *mut c_int, ierr: *mut c_int) ierr,
    |c| {
        // SAFETY: the binding's arguments after a successful receive.
        unsafe { received(&mut c, count, dt, source, tag, comm) };
    }
);
fortran!(
    mpi_irecv_ = "MPI_Irecv",
    fn(buf: Buf, count: F, dt: F, source: F, tag: F, comm: F, req: *mut c_int, ierr: *mut c_int) ierr,
    |c| {
        // SAFETY: as above (the message is paired when posted: MPI matches
        // receives in the order they are posted).
        unsafe { received(&mut c, count, dt, source, tag, comm) };
    }
);
fortran!(
    mpi_sendrecv_ = "MPI_Sendrecv",
    fn(
        sbuf: Buf,
        scount: F,
        sdt: F,
        dest: F,
        stag: F,
        rbuf: Buf,
        rcount: F,
        rdt: F,
        source: F,
        rtag: F,
        comm: F,
        status: *mut c_int,
        ierr: *mut c_int,
    ) ierr,
    |c| {
        // SAFETY: the binding's arguments after a successful exchange.
        unsafe {
            sent(&mut c, scount, sdt, dest, stag, comm);
            received(&mut c, rcount, rdt, source, rtag, comm);
        }
    }
);
fortran!(
    mpi_wait_ = "MPI_Wait",
    fn(req: *mut c_int, status: *mut c_int, ierr: *mut c_int) ierr,
    |c| {}
);
fortran!(
    mpi_waitall_ = "MPI_Waitall",
    fn(count: F, reqs: *mut c_int, statuses: *mut c_int, ierr: *mut c_int) ierr,
    |c| {}
);
fortran!(
    mpi_barrier_ = "MPI_Barrier",
    fn(comm: F, ierr: *mut c_int) ierr,
    |c| {
        // SAFETY: a Fortran communicator.
        c.on(unsafe { c_comm(comm) });
    }
);
fortran!(
    mpi_bcast_ = "MPI_Bcast",
    fn(buf: Buf, count: F, dt: F, root: F, comm: F, ierr: *mut c_int) ierr,
    |c| {
        // SAFETY: the binding's arguments after a successful call.
        unsafe {
            c.on(c_comm(comm));
            c.bytes(bytes(count, dt));
            c.root(*root);
        }
    }
);
fortran!(
    mpi_reduce_ = "MPI_Reduce",
    fn(sbuf: Buf, rbuf: Buf, count: F, dt: F, op: F, root: F, comm: F, ierr: *mut c_int) ierr,
    |c| {
        // SAFETY: as above.
        unsafe {
            c.on(c_comm(comm));
            c.bytes(bytes(count, dt));
            c.root(*root);
        }
    }
);
fortran!(
    mpi_allreduce_ = "MPI_Allreduce",
    fn(sbuf: Buf, rbuf: Buf, count: F, dt: F, op: F, comm: F, ierr: *mut c_int) ierr,
    |c| {
        // SAFETY: as above.
        unsafe {
            c.on(c_comm(comm));
            c.bytes(bytes(count, dt));
        }
    }
);
fortran!(
    mpi_alltoall_ = "MPI_Alltoall",
    fn(sbuf: Buf, scount: F, sdt: F, rbuf: Buf, rcount: F, rdt: F, comm: F, ierr: *mut c_int) ierr,
    |c| {
        // SAFETY: as above.
        unsafe {
            let info = c.on(c_comm(comm));
            let ranks = u64::try_from(info.size).unwrap_or(0);
            c.bytes(bytes(scount, sdt) * ranks);
            c.recv_bytes(bytes(rcount, rdt) * ranks);
        }
    }
);
fortran!(
    mpi_allgather_ = "MPI_Allgather",
    fn(sbuf: Buf, scount: F, sdt: F, rbuf: Buf, rcount: F, rdt: F, comm: F, ierr: *mut c_int) ierr,
    |c| {
        // SAFETY: as above.
        unsafe {
            let info = c.on(c_comm(comm));
            c.bytes(bytes(scount, sdt));
            c.recv_bytes(bytes(rcount, rdt) * u64::try_from(info.size).unwrap_or(0));
        }
    }
);
fortran!(mpi_init_ = "MPI_Init", fn(ierr: *mut c_int) ierr, |c| {
    c.on(abi().comm_world);
    super::clock_sync::at_init();
});
fortran!(
    mpi_init_thread_ = "MPI_Init_thread",
    fn(required: F, provided: *mut c_int, ierr: *mut c_int) ierr,
    |c| {
        c.on(abi().comm_world);
        super::clock_sync::at_init();
    }
);

static REAL_TYPE_FREE: RealFn = RealFn::new(c"pmpi_type_free_");

/// Not recorded: forwards, and forgets the sizes threads cached.
///
/// # Safety
/// MPI's contract for the Fortran `MPI_TYPE_FREE`.
#[no_mangle]
pub unsafe extern "C" fn mpi_type_free_(datatype: *mut c_int, ierr: *mut c_int) {
    let real_fn = real!(REAL_TYPE_FREE as fn(*mut c_int, *mut c_int) -> ());
    // SAFETY: forwarding the caller's arguments unchanged.
    unsafe { real_fn(datatype, ierr) };
    super::type_freed();
}

static REAL_FINALIZE: RealFn = RealFn::new(c"pmpi_finalize_");

/// Compares clocks with rank 0 a last time, then records `MPI_Finalize`.
///
/// # Safety
/// MPI's contract for the Fortran `MPI_FINALIZE`.
#[no_mangle]
pub unsafe extern "C" fn mpi_finalize_(ierr: *mut c_int) {
    const FUNCTION: u16 = function("MPI_Finalize");
    let real_fn = real!(REAL_FINALIZE as fn(*mut c_int) -> ());
    if abi().open_mpi && Call::recording() {
        keeping_errno(super::clock_sync::at_finalize);
    }
    let call = if abi().open_mpi {
        Call::enter(FUNCTION)
    } else {
        None
    };
    // SAFETY: forwarding the caller's argument unchanged.
    unsafe { real_fn(ierr) };
    if let Some(mut c) = call {
        c.returned();
        keeping_errno(|| c.emit());
    }
}
