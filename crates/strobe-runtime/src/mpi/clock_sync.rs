//! Clock comparison between ranks at `MPI_Init` and `MPI_Finalize`.
//!
//! Owns the ping-pong: rank 0 sends each other rank a few pings on a
//! private duplicate of `MPI_COMM_WORLD`, each answered with the rank's
//! `CLOCK_MONOTONIC`; the exchange with the shortest round trip gives the
//! offset (rank 0's clock at the answer's moment, taken as the middle of
//! the round trip, minus the rank's), which rank 0 then sends the rank.
//! Each rank writes its result as an `MPI_CLOCK` record; post-processing
//! interpolates the offset between the two comparisons (clocks drift).
//!
//! It only uses `PMPI_` calls on its own communicator, so the program's
//! messages, tags and communicators never see it; it never runs outside
//! `MPI_Init`/`MPI_Finalize`. `STROBE_MPI_CLOCK_SKEW_NS` (a test knob)
//! adds a constant to the clock this module reads, to check that a known
//! offset is found.

use super::abi::{abi, Handle};
use crate::events::emit;
use crate::interpose::{real, RealFn};
use crate::state::current;
use libc::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use strobe_core::clock::now_ns;
use strobe_wire::record::{as_bytes, event, mpi_phase, MpiClockBody};

static PMPI_COMM_DUP: RealFn = RealFn::new(c"PMPI_Comm_dup");
static PMPI_COMM_FREE: RealFn = RealFn::new(c"PMPI_Comm_free");
static PMPI_SEND: RealFn = RealFn::new(c"PMPI_Send");
static PMPI_RECV: RealFn = RealFn::new(c"PMPI_Recv");

/// The private communicator (a handle of the interface), 0 before
/// `MPI_Init`.
static PRIVATE: AtomicUsize = AtomicUsize::new(0);

/// The clock compared: `CLOCK_MONOTONIC`, plus the test skew.
fn clock() -> u64 {
    static SKEW: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    let skew = *SKEW.get_or_init(|| {
        std::env::var("STROBE_MPI_CLOCK_SKEW_NS")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    });
    now_ns().wrapping_add_signed(skew)
}

/// Right after a successful `MPI_Init`: makes the private communicator
/// and compares clocks.
pub fn at_init() {
    let dup = real!(PMPI_COMM_DUP as fn(Handle, *mut u8) -> c_int);
    let a = abi();
    let mut out = [0u8; 8];
    // SAFETY: the world communicator exists after MPI_Init; `out` holds a
    // handle of either interface.
    if unsafe { dup(a.comm_world, out.as_mut_ptr()) } != 0 {
        return;
    }
    // SAFETY: written by the library just now.
    PRIVATE.store(unsafe { a.read_handle(out.as_ptr()) }, Ordering::Release);
    compare(mpi_phase::INIT);
}

/// Just before `MPI_Finalize`: compares clocks and frees the private
/// communicator.
pub fn at_finalize() {
    let comm = PRIVATE.swap(0, Ordering::AcqRel);
    if comm == 0 {
        return;
    }
    compare_on(comm, mpi_phase::FINALIZE);
    let free = real!(PMPI_COMM_FREE as fn(*mut u8) -> c_int);
    let mut handle = [0u8; 8];
    let n = abi().handle_bytes();
    handle[..n].copy_from_slice(&comm.to_le_bytes()[..n]);
    // SAFETY: the communicator this module made, not freed before.
    unsafe { free(handle.as_mut_ptr()) };
}

fn compare(phase: u32) {
    let comm = PRIVATE.load(Ordering::Acquire);
    if comm != 0 {
        compare_on(comm, phase);
    }
}

/// What rank 0 sends: `[PING, 0, 0, 0]` or `[VERDICT, offset, the rank's
/// clock at the best answer, round trip]`.
type Message = [u64; 4];
const PING: u64 = 0;
const VERDICT: u64 = 1;
/// Pings per rank: at least `MIN_ROUNDS`, then until a round trip is at
/// most `GOOD_RTT_NS` (a loaded node preempts ranks mid-exchange), at most
/// `MAX_ROUNDS`.
const MIN_ROUNDS: u32 = 8;
const MAX_ROUNDS: u32 = 200;
const GOOD_RTT_NS: u64 = 20_000;

fn send(comm: Handle, to: c_int, data: &[u64]) {
    let send = real!(PMPI_SEND as fn(*const c_void, c_int, Handle, c_int, c_int, Handle) -> c_int);
    // SAFETY: `data` is readable for its length in bytes, sent as MPI_BYTE.
    unsafe {
        send(
            data.as_ptr() as *const c_void,
            (data.len() * 8) as c_int,
            abi().byte,
            to,
            0,
            comm,
        )
    };
}

fn recv(comm: Handle, from: c_int, data: &mut [u64]) {
    let recv =
        real!(PMPI_RECV as fn(*mut c_void, c_int, Handle, c_int, c_int, Handle, *mut u8) -> c_int);
    let a = abi();
    // SAFETY: `data` is writable for its length in bytes; the status is
    // ignored (the interface's sentinel).
    unsafe {
        recv(
            data.as_mut_ptr() as *mut c_void,
            (data.len() * 8) as c_int,
            a.byte,
            from,
            0,
            comm,
            a.status_ignore as *mut u8,
        )
    };
}

/// Rank 0's side of the exchange with `peer`: (round trip, offset, the
/// peer's clock) of the exchange with the shortest round trip.
fn best_exchange(comm: Handle, peer: c_int) -> (u64, i64, u64) {
    let mut best = (u64::MAX, 0i64, 0u64);
    for round in 0..MAX_ROUNDS {
        if round >= MIN_ROUNDS && best.0 <= GOOD_RTT_NS {
            break;
        }
        let mut answer = [0u64; 1];
        let t0 = clock();
        send(comm, peer, &[PING, 0, 0, 0]);
        recv(comm, peer, &mut answer);
        let t1 = clock();
        let rtt = t1.saturating_sub(t0);
        if rtt < best.0 {
            best = (rtt, (t0 + rtt / 2) as i64 - answer[0] as i64, answer[0]);
        }
    }
    best
}

fn compare_on(comm: Handle, phase: u32) {
    let (size, rank) = super::size_and_rank(comm);
    if size <= 0 || rank < 0 {
        return;
    }
    let mut mine = MpiClockBody {
        rank,
        world_size: size,
        reference_rank: 0,
        phase,
        ..Default::default()
    };
    if rank == 0 {
        for peer in 1..size {
            let (rtt, offset, local) = best_exchange(comm, peer);
            let verdict: Message = [VERDICT, offset as u64, local, rtt];
            send(comm, peer, &verdict);
        }
        mine.local_ns = clock();
    } else {
        loop {
            let mut message: Message = [0; 4];
            recv(comm, 0, &mut message);
            if message[0] == VERDICT {
                mine.offset_ns = message[1] as i64;
                mine.local_ns = message[2];
                mine.rtt_ns = message[3];
                break;
            }
            send(comm, 0, &[clock()]);
        }
    }
    if let Some(rt) = current() {
        if let Some(slot) = crate::thread_slot::slot_of_current_thread(rt) {
            emit(rt, slot, event::MPI_CLOCK, 0, now_ns(), as_bytes(&mine));
        }
    }
}
