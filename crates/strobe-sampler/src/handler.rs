//! The sampling signal handler and the per-thread state it writes to.
//!
//! **Runs inside a signal handler**: everything reachable from
//! [`on_signal`] allocates nothing, takes no lock, formats nothing and calls
//! only async-signal-safe functions (`clock_gettime`, `getrusage`,
//! `write`). It saves and restores `errno` and refuses to re-enter itself on
//! the same thread. The per-thread state is found through the pointer the
//! timer carries in the signal's value, so no thread-local is touched.

use crate::record::{RecordHeader, HEADER_BYTES};
use crate::ring::Ring;
use crate::snapshot::NativeCache;
use crate::timer::{ThreadTimer, TimerClock};
use crate::unwind::{unwind, StackBounds, StartRegs};
use std::cell::UnsafeCell;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use strobe_core::clock::{now_ns, Clock};

/// Counters of one thread's sampler (also summed for the process).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub taken: AtomicU64,
    pub lost_full: AtomicU64,
    pub lost_reentrant: AtomicU64,
    pub overruns: AtomicU64,
    pub incomplete: AtomicU64,
}

/// Everything the handler needs for one thread. Lives at a stable address
/// (inside an `Arc`) for as long as any timer may point at it, and is
/// reused for later threads rather than freed.
#[repr(align(64))]
pub(crate) struct ThreadSampler {
    pub tid: AtomicI32,
    pub active: AtomicBool,
    busy: AtomicBool,
    stack_lo: AtomicU64,
    stack_hi: AtomicU64,
    /// Sorted writable mappings, to find the stack of a thread whose bounds
    /// were not known when it was registered (threads older than strobe).
    stack_maps: UnsafeCell<Box<[(u64, u64)]>>,
    cache: UnsafeCell<NativeCache>,
    pub ring: Ring,
    max_depth: usize,
    wake_fd: AtomicI32,
    pub wake_sent: AtomicBool,
    pub counters: Counters,
    pub timers: Mutex<Vec<ThreadTimer>>,
}

// SAFETY: `cache` and `stack_maps` are touched only by the owning thread's
// handler (and by `reset`, which runs before any timer targets the thread);
// everything else is atomic or locked.
unsafe impl Sync for ThreadSampler {}
// SAFETY: as above.
unsafe impl Send for ThreadSampler {}

impl ThreadSampler {
    /// A fresh, inactive sampler with a ring of `ring_bytes`.
    pub fn new(ring_bytes: usize, max_depth: usize) -> io::Result<ThreadSampler> {
        let ring = Ring::new(ring_bytes)?;
        let max_depth = max_depth.min((ring.max_payload() - HEADER_BYTES) / 8);
        Ok(ThreadSampler {
            tid: AtomicI32::new(0),
            active: AtomicBool::new(false),
            busy: AtomicBool::new(false),
            stack_lo: AtomicU64::new(0),
            stack_hi: AtomicU64::new(0),
            stack_maps: UnsafeCell::new(Box::new([])),
            cache: UnsafeCell::new(NativeCache::new_in()),
            ring,
            max_depth,
            wake_fd: AtomicI32::new(-1),
            wake_sent: AtomicBool::new(false),
            counters: Counters::default(),
            timers: Mutex::new(Vec::new()),
        })
    }

    /// Prepares the sampler for thread `tid` before its timers exist.
    ///
    /// # Safety
    /// No timer may target this sampler while it is reset.
    pub unsafe fn reset(
        &self,
        tid: i32,
        stack: Option<StackBounds>,
        maps: Box<[(u64, u64)]>,
        wake_fd: i32,
    ) {
        self.tid.store(tid, Ordering::SeqCst);
        let stack = stack.unwrap_or_default();
        self.stack_lo.store(stack.lo, Ordering::SeqCst);
        self.stack_hi.store(stack.hi, Ordering::SeqCst);
        // SAFETY: no handler runs for this sampler (contract).
        unsafe { *self.stack_maps.get() = maps };
        self.wake_fd.store(wake_fd, Ordering::SeqCst);
        self.wake_sent.store(false, Ordering::SeqCst);
        self.active.store(true, Ordering::SeqCst);
    }

    /// Stops the handler from waking an allocator whose eventfd is closing.
    pub fn forget_wake_fd(&self) {
        self.wake_fd.store(-1, Ordering::SeqCst);
    }

    /// The value a timer carries: this sampler's address tagged with the
    /// clock in its lowest bit (the struct is 64-byte aligned).
    pub fn timer_value(&self, clock: TimerClock) -> *mut libc::c_void {
        let tag = usize::from(clock == TimerClock::Realtime);
        (self as *const ThreadSampler as usize | tag) as *mut libc::c_void
    }

    fn stack_bounds(&self, sp: u64) -> StackBounds {
        let lo = self.stack_lo.load(Ordering::Relaxed);
        let hi = self.stack_hi.load(Ordering::Relaxed);
        if lo < hi && (lo..hi).contains(&sp) {
            return StackBounds { lo, hi };
        }
        // SAFETY: only this thread's handler reads the maps (see Sync impl).
        let maps = unsafe { &*self.stack_maps.get() };
        let i = maps.partition_point(|&(start, _)| start <= sp);
        match i.checked_sub(1).map(|i| maps[i]) {
            Some((start, end)) if sp < end => StackBounds { lo: start, hi: end },
            // Unknown stack: allow only the innermost frame.
            _ => StackBounds { lo: sp, hi: sp },
        }
    }

    /// Takes one sample of the interrupted thread. **Signal handler.**
    ///
    /// # Safety
    /// Must run in the signal handler on the thread this sampler belongs
    /// to, with `ctx` the handler's ucontext.
    unsafe fn take_sample(&self, ctx: *const libc::c_void, clock: TimerClock, overruns: i32) {
        if !self.active.load(Ordering::Acquire)
            || self.tid.load(Ordering::Relaxed) != strobe_core::thread::gettid()
        {
            return;
        }
        if self.busy.swap(true, Ordering::Acquire) {
            self.counters.lost_reentrant.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if overruns > 0 {
            self.counters
                .overruns
                .fetch_add(overruns as u64, Ordering::Relaxed);
        }
        let timestamp_ns = now_ns();
        let Some(mut slot) = self.ring.reserve(HEADER_BYTES + self.max_depth * 8) else {
            self.counters.lost_full.fetch_add(1, Ordering::Relaxed);
            self.busy.store(false, Ordering::Release);
            return;
        };
        let bytes = slot.bytes();
        let (head, frames) = bytes.split_at_mut(HEADER_BYTES);
        // SAFETY: the payload is 8-aligned (ring records are) and holds
        // max_depth frames after the header.
        let frames = unsafe {
            std::slice::from_raw_parts_mut(frames.as_mut_ptr() as *mut u64, self.max_depth)
        };
        // SAFETY: contract of this function.
        let regs = unsafe { StartRegs::from_ucontext(ctx) };
        let stack = self.stack_bounds(regs.sp);
        // SAFETY: only this thread's handler uses the cache, and the busy
        // flag excludes nested handlers.
        let cache = unsafe { &mut *self.cache.get() };
        let walked = unwind(regs, stack, cache, frames);
        let header = RecordHeader {
            timestamp_ns,
            cpu_time_ns: Clock::ThreadCpu.read_ns(),
            peak_rss_kb: peak_rss_kb(),
            tid: self.tid.load(Ordering::Relaxed),
            depth: walked.depth as u16,
            clock: u8::from(clock == TimerClock::Realtime),
            complete: u8::from(walked.complete),
            overruns: overruns.max(0) as u32,
            reserved: 0,
        };
        // SAFETY: `head` is HEADER_BYTES long; write_unaligned needs no alignment.
        unsafe { std::ptr::write_unaligned(head.as_mut_ptr() as *mut RecordHeader, header) };
        self.ring.commit(slot, HEADER_BYTES + walked.depth * 8);
        self.counters.taken.fetch_add(1, Ordering::Relaxed);
        if !walked.complete {
            self.counters.incomplete.fetch_add(1, Ordering::Relaxed);
        }
        if self.ring.used() * 2 > self.ring.capacity()
            && !self.wake_sent.swap(true, Ordering::Relaxed)
        {
            let fd = self.wake_fd.load(Ordering::Relaxed);
            if fd >= 0 {
                let one: u64 = 1;
                // SAFETY: write(2) is async-signal-safe; 8 bytes from a local.
                unsafe { libc::write(fd, &one as *const u64 as *const libc::c_void, 8) };
            }
        }
        self.busy.store(false, Ordering::Release);
    }
}

/// Peak RSS of the process in KiB (`getrusage`, a plain system call).
fn peak_rss_kb() -> u64 {
    // SAFETY: rusage is plain old data.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0;
    }
    usage.ru_maxrss.max(0) as u64
}

/// Addresses of every sampler ever created (they are never freed), so the
/// handler dereferences a timer's value only when it is one of ours: a
/// program may run POSIX timers of its own on the same signal.
const MAX_SAMPLERS: usize = 1 << 16;
static SAMPLERS: [AtomicUsize; MAX_SAMPLERS] = [const { AtomicUsize::new(0) }; MAX_SAMPLERS];
static SAMPLER_COUNT: AtomicUsize = AtomicUsize::new(0);

/// Records a sampler's address for [`is_ours`]. Fails when the table is
/// full (the thread is then not sampled).
pub(crate) fn register_sampler(sampler: *const ThreadSampler) -> bool {
    let i = SAMPLER_COUNT.fetch_add(1, Ordering::AcqRel);
    if i >= MAX_SAMPLERS {
        SAMPLER_COUNT.fetch_sub(1, Ordering::AcqRel);
        return false;
    }
    SAMPLERS[i].store(sampler as usize, Ordering::Release);
    true
}

/// Whether `address` is a sampler of ours. **Signal handler**: atomic loads.
fn is_ours(address: usize) -> bool {
    let n = SAMPLER_COUNT.load(Ordering::Acquire).min(MAX_SAMPLERS);
    SAMPLERS[..n]
        .iter()
        .any(|s| s.load(Ordering::Acquire) == address)
}

const SI_TIMER: i32 = -2;
/// Offsets in x86-64 `siginfo_t` of the POSIX-timer fields.
const SI_OVERRUN_OFFSET: usize = 20;
const SI_VALUE_OFFSET: usize = 24;

static PREVIOUS: [AtomicU64; 65] = [const { AtomicU64::new(0) }; 65];
static PREVIOUS_SIGINFO: [AtomicBool; 65] = [const { AtomicBool::new(false) }; 65];

/// Installs [`on_signal`] for `signal`, remembering the previous handler so
/// that signals not sent by our timers reach it. Every signal in `block` is
/// blocked while the handler runs, so the CPU-time and real-time samplers
/// never interrupt each other (a sample taken inside the other's handler
/// could not be unwound through the signal trampoline). Stays installed for the
/// life of the process: a timer signal still queued after a timer is
/// deleted must not find the default action (which terminates on SIGPROF).
pub(crate) fn install(signal: i32, block: &[i32]) -> io::Result<()> {
    if !(1..=64).contains(&signal) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("signal {signal} is out of range 1..=64"),
        ));
    }
    // SAFETY: sigaction is plain old data.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = on_signal as *const () as usize;
    action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
    // SAFETY: valid pointer to the signal mask inside `action`.
    unsafe { libc::sigemptyset(&mut action.sa_mask) };
    for &other in block {
        // SAFETY: as above; `other` was range-checked by the caller.
        unsafe { libc::sigaddset(&mut action.sa_mask, other) };
    }
    // SAFETY: as above.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: valid action and out-pointer.
    if unsafe { libc::sigaction(signal, &action, &mut old) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if old.sa_sigaction != on_signal as *const () as usize {
        PREVIOUS[signal as usize].store(old.sa_sigaction as u64, Ordering::SeqCst);
        PREVIOUS_SIGINFO[signal as usize]
            .store(old.sa_flags & libc::SA_SIGINFO != 0, Ordering::SeqCst);
    }
    Ok(())
}

/// The handler. **Signal handler**: see the module documentation.
extern "C" fn on_signal(signal: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: errno location of the current thread is always valid.
    let errno = unsafe { libc::__errno_location() };
    // SAFETY: as above.
    let saved_errno = unsafe { *errno };
    // SAFETY: the kernel passes a valid siginfo to SA_SIGINFO handlers.
    let code = unsafe { (*info).si_code };
    if code == SI_TIMER {
        // SAFETY: for SI_TIMER the siginfo holds the timer's overrun count
        // and sigval at these offsets (x86-64 Linux layout).
        let (overruns, value) = unsafe {
            let base = info as *const u8;
            (
                (base.add(SI_OVERRUN_OFFSET) as *const i32).read(),
                (base.add(SI_VALUE_OFFSET) as *const usize).read(),
            )
        };
        let clock = if value & 1 == 1 {
            TimerClock::Realtime
        } else {
            TimerClock::ThreadCpu
        };
        let sampler = value & !1;
        if sampler != 0 && is_ours(sampler) {
            // SAFETY: a registered sampler is never freed while the process
            // runs; take_sample checks the thread itself.
            unsafe { (*(sampler as *const ThreadSampler)).take_sample(ctx, clock, overruns) };
        } else {
            // Another timer of the program on the same signal.
            chain(signal, info, ctx);
        }
    } else {
        chain(signal, info, ctx);
    }
    // SAFETY: restoring the value saved above.
    unsafe { *errno = saved_errno };
}

/// Passes a signal we did not cause to the handler installed before ours.
/// Default or ignore dispositions are not re-raised: for SIGPROF the
/// default would terminate the program. **Signal handler.**
fn chain(signal: i32, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let Some(previous) = PREVIOUS
        .get(signal as usize)
        .map(|p| p.load(Ordering::Relaxed) as usize)
    else {
        return;
    };
    if previous == libc::SIG_DFL || previous == libc::SIG_IGN {
        return;
    }
    if PREVIOUS_SIGINFO[signal as usize].load(Ordering::Relaxed) {
        // SAFETY: the previous handler was installed with SA_SIGINFO.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(previous) };
        f(signal, info, ctx);
    } else {
        // SAFETY: the previous handler was installed without SA_SIGINFO.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(previous) };
        f(signal);
    }
}
