//! A forked child's segment, kept to itself until the child records
//! something of the program's.
//!
//! Owns the dormant state of this process's segment. A child that follows
//! starts with a private segment (`Segment::create_private`: one mapping;
//! no `memfd`, no connection, nothing for the collector to do), so a child
//! that only `exec`s or `_exit`s costs next to nothing. Its runtime writes
//! there as anywhere else. The first record the program causes wakes it:
//! a sample (the sampler's hook, **in the signal handler**), an event (a
//! region, a marker, a child announced), a new thread (before it exists,
//! so that one thread alone writes while the segment moves) or a progress
//! point. Waking moves the segment into a `memfd` at the same addresses
//! (`Segment::share`) and hands it to the collector; the collector then
//! reads everything written since the `fork`, as from any segment.
//!
//! [`wake`] runs in signal handlers and in a `vfork` child sharing this
//! memory: it allocates, locks and formats nothing, does nothing in a
//! process other than the dormant one, and blocks every signal while it
//! works. Never used by a process that did not fork.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU8, Ordering};
use strobe_wire::segment::Segment;

use crate::connect::Address;

/// No dormant segment (the process's segment is shared, or there is none).
const AWAKE: u8 = 0;
/// The segment is private: the next record wakes it.
const DORMANT: u8 = 1;
/// Being shared now.
const WAKING: u8 = 2;
/// Sharing failed: the child's records stay private (said once).
const FAILED: u8 = 3;

static STATE: AtomicU8 = AtomicU8::new(AWAKE);
/// The dormant process (a `vfork` child sharing its memory must not wake
/// it).
static OWNER: AtomicI32 = AtomicI32::new(0);
static SEGMENT: AtomicPtr<Segment> = AtomicPtr::new(std::ptr::null_mut());
/// The error of a failed wake (an `errno`), said from outside the handler.
static FAILURE: AtomicI32 = AtomicI32::new(0);

/// The collector's address, written before the state turns dormant and
/// read only while it is.
struct Collector(UnsafeCell<Option<Address>>);
// SAFETY: written only by `enter` while no wake can run (the state is not
// DORMANT), read only by the one `wake` that moved the state to WAKING.
unsafe impl Sync for Collector {}
static COLLECTOR: Collector = Collector(UnsafeCell::new(None));

/// Makes `segment` (private, made by `Segment::create_private`) this
/// process's dormant segment, to be handed to the collector at `collector`
/// when it wakes. Called once the child's runtime has started.
pub fn enter(segment: &'static Segment, collector: Address) {
    STATE.store(AWAKE, Ordering::SeqCst);
    // SAFETY: the state is not DORMANT: no wake reads the address now.
    unsafe { *COLLECTOR.0.get() = Some(collector) };
    SEGMENT.store(segment as *const Segment as *mut Segment, Ordering::SeqCst);
    // SAFETY: getpid has no preconditions.
    OWNER.store(unsafe { libc::getpid() }, Ordering::SeqCst);
    STATE.store(DORMANT, Ordering::SeqCst);
}

/// Whether this process's segment is still private.
#[inline]
pub fn is_dormant() -> bool {
    STATE.load(Ordering::Relaxed) == DORMANT
}

/// Whether sharing this process's segment failed: nobody reads its rings,
/// so nobody makes room in them.
pub fn failed() -> bool {
    STATE.load(Ordering::Relaxed) == FAILED
}

/// Shares the dormant segment with the collector, if there is one and it
/// belongs to the calling process. **Signal handler** safe.
pub fn wake() {
    if !is_dormant() {
        return;
    }
    // SAFETY: getpid has no preconditions.
    if unsafe { libc::getpid() } != OWNER.load(Ordering::SeqCst) {
        return;
    }
    let old = block_all_signals();
    if STATE
        .compare_exchange(DORMANT, WAKING, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok()
    {
        let state = match share() {
            Ok(()) => AWAKE,
            Err(errno) => {
                FAILURE.store(errno, Ordering::SeqCst);
                FAILED
            }
        };
        STATE.store(state, Ordering::SeqCst);
    }
    set_signal_mask(old);
}

/// Wakes the dormant segment from ordinary code, and says once why a wake
/// failed.
pub fn wake_and_report() {
    wake();
    if STATE.load(Ordering::Relaxed) == FAILED {
        let errno = FAILURE.swap(0, Ordering::SeqCst);
        if errno != 0 {
            crate::log::emit(&format!(
                "this forked process is not profiled: its segment could not be handed to the \
                 collector ({})",
                std::io::Error::from_raw_os_error(errno)
            ));
        }
    }
}

/// Moves the segment into a memfd and hands it over; the `errno` of what
/// failed. **Signal handler**.
fn share() -> Result<(), i32> {
    let errno = |e: std::io::Error| e.raw_os_error().unwrap_or(libc::EIO);
    // SAFETY: set by `enter` before the state turned DORMANT, never freed.
    let segment = unsafe { SEGMENT.load(Ordering::SeqCst).as_ref() }.ok_or(libc::EINVAL)?;
    // SAFETY: this wake moved the state to WAKING: `enter` is done writing.
    let collector = unsafe { (*COLLECTOR.0.get()).as_ref() }.ok_or(libc::EINVAL)?;
    let fd = segment.share().map_err(errno)?;
    crate::connect::hand_over_to(collector, &fd).map_err(errno)
}

/// Blocks every signal of the calling thread; returns the mask before.
fn block_all_signals() -> u64 {
    let all = u64::MAX;
    let mut old = 0u64;
    // SAFETY: rt_sigprocmask with 8-byte masks (glibc's wrappers, which the
    // runtime interposes, are avoided).
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_BLOCK,
            &all as *const u64,
            &mut old as *mut u64,
            8usize,
        )
    };
    old
}

/// Sets the calling thread's signal mask back to `mask`.
fn set_signal_mask(mask: u64) {
    // SAFETY: rt_sigprocmask with an 8-byte mask.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &mask as *const u64,
            std::ptr::null_mut::<u64>(),
            8usize,
        )
    };
}
