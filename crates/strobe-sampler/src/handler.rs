//! The sampling signal handler and the per-thread state it writes to.
//!
//! **Runs inside a signal handler**: everything reachable from
//! [`on_signal`] allocates nothing, takes no lock, formats nothing and calls
//! only async-signal-safe functions (`clock_gettime`, `getrusage`, `gettid`,
//! `futex`, `sigprocmask`, `raise`; through the counter hook a process
//! may set, [`set_sample_counters`], `ioctl` and `read` on its counters'
//! descriptors; through the after-sample hook, [`set_after_sample`],
//! `clock_nanosleep`). It saves and restores `errno` and
//! refuses to re-enter itself on the same thread. A timer's signal carries
//! a tagged index into a fixed table of samplers, so finding the thread's
//! state is one bounds-checked load, and signals that are not from strobe's
//! timers go to the program's own disposition ([`crate::signals`]).

use crate::signals;
use crate::snapshot::NativeCache;
use crate::timer::ThreadTimer;
use crate::unwind::{unwind, StackBounds, StartRegs};
use std::cell::UnsafeCell;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use strobe_core::clock::{now_ns, Clock};
use strobe_wire::record::COUNTER_MISSING;
use strobe_wire::ring::ShmRing;
use strobe_wire::sample::{Sample, SampleHead, TimerClock, MAX_SAMPLE_COUNTERS, SAMPLE_HEAD_BYTES};
use strobe_wire::segment::{Segment, Slot};

/// Everything the handler needs for one thread. Lives at a stable address
/// for as long as any timer may point at it, and is reused for later
/// threads rather than freed.
pub(crate) struct ThreadSampler {
    /// This sampler's index in [`SAMPLERS`].
    pub index: u32,
    pub tid: AtomicI32,
    pub active: AtomicBool,
    busy: AtomicBool,
    stack_lo: AtomicU64,
    stack_hi: AtomicU64,
    /// Sorted writable mappings, to find the stack of a thread whose bounds
    /// were not known when it was registered (threads older than strobe).
    stack_maps: UnsafeCell<Box<[(u64, u64)]>>,
    cache: UnsafeCell<NativeCache>,
    /// The thread's slot (index and state) and sample ring in the
    /// process's segment.
    target: UnsafeCell<Option<(u32, &'static Slot, ShmRing)>>,
    pub max_depth: usize,
    pub timers: Mutex<Vec<ThreadTimer>>,
}

// SAFETY: `cache`, `stack_maps` and `target` are touched only by the owning
// thread's handler and by `reset`, which runs before any timer targets the
// sampler; everything else is atomic or locked.
unsafe impl Sync for ThreadSampler {}
// SAFETY: as above.
unsafe impl Send for ThreadSampler {}

/// Most samplers that can exist (threads sampled at once, plus retired ones
/// waiting in the pool).
pub(crate) const MAX_SAMPLERS: usize = 1 << 16;
static SAMPLERS: [AtomicPtr<ThreadSampler>; MAX_SAMPLERS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_SAMPLERS];
static SAMPLER_COUNT: AtomicUsize = AtomicUsize::new(0);
/// The segment samples go to (replaced in a forked child).
static SEGMENT: AtomicPtr<Segment> = AtomicPtr::new(std::ptr::null_mut());
/// Marks a timer value as strobe's: the high 32 bits of the `sigval`.
const TAG: usize = 0x5354_0000_0000_0000;
const TAG_MASK: usize = 0xffff_0000_0000_0000;

/// A function the handler calls with every sample it records (0 = none).
static SAMPLE_TAP: AtomicUsize = AtomicUsize::new(0);

/// A function the handler calls after every sample, on the sampled thread
/// (0 = none): `fn(slot, frames, periods)`.
static AFTER_SAMPLE: AtomicUsize = AtomicUsize::new(0);

/// A function the handler calls before it writes a sample (0 = none):
/// `fn()`.
static BEFORE_SAMPLE: AtomicUsize = AtomicUsize::new(0);

/// Counter values every sample carries (0 = none), and the function that
/// reads them (`fn(u32, &mut [u64])`, 0 = none).
static COUNTER_VALUES: AtomicUsize = AtomicUsize::new(0);
static COUNTER_HOOK: AtomicUsize = AtomicUsize::new(0);

/// Has every sample carry `count` counter values after its frames:
/// `hook(slot, values)` runs **in the signal handler**, on the sampled
/// thread, with the slot the thread's samples go to, and fills `values`
/// (`count` of them, [`COUNTER_MISSING`] for any it cannot read). It
/// must not allocate, lock or block. Without a hook the values are
/// missing. Set it before threads register; `count` is capped at
/// [`MAX_SAMPLE_COUNTERS`].
pub fn set_sample_counters(count: usize, hook: Option<fn(u32, &mut [u64])>) {
    COUNTER_HOOK.store(hook.map_or(0, |f| f as usize), Ordering::Release);
    COUNTER_VALUES.store(count.min(MAX_SAMPLE_COUNTERS), Ordering::Release);
}

/// Has the handler also hand every sample it records to `tap`, which runs
/// **in the signal handler** (it must not allocate, lock or block).
pub fn set_sample_tap(tap: Option<fn(&Sample<'_>)>) {
    SAMPLE_TAP.store(tap.map_or(0, |f| f as usize), Ordering::Release);
}

/// Has the handler call `hook(slot, frames, periods)` after every sample
/// it records, **in the signal handler** on the sampled thread, with the
/// slot its samples go to, the sample's frames (the interrupted address
/// first, then return addresses) and the sampling periods the sample
/// stands for (1 + the timer expirations the kernel merged into it). The
/// hook must not allocate or lock; it may block the thread (causal
/// profiling's pauses sleep there): the thread takes no other sample
/// meanwhile, and its sample is committed after the hook returns.
pub fn set_after_sample(hook: Option<fn(u32, &[u64], u32)>) {
    AFTER_SAMPLE.store(hook.map_or(0, |f| f as usize), Ordering::Release);
}

/// Has the handler call `hook()` before it writes each sample into the
/// segment, **in the signal handler** on the sampled thread (it must not
/// allocate or lock): a forked child's runtime shares its segment with the
/// collector there when it takes its first sample.
pub fn set_before_sample(hook: Option<fn()>) {
    BEFORE_SAMPLE.store(hook.map_or(0, |f| f as usize), Ordering::Release);
}

/// Publishes the segment the handler writes to.
pub(crate) fn set_segment(segment: &'static Segment) {
    SEGMENT.store(segment as *const Segment as *mut Segment, Ordering::Release);
}

impl ThreadSampler {
    /// A fresh, inactive sampler, entered in the table. Leaked: a timer
    /// signal may still be in flight for it at any time.
    pub fn create(max_depth: usize) -> io::Result<&'static ThreadSampler> {
        let index = SAMPLER_COUNT.fetch_add(1, Ordering::AcqRel);
        if index >= MAX_SAMPLERS {
            SAMPLER_COUNT.fetch_sub(1, Ordering::AcqRel);
            return Err(io::Error::other("more than 65536 sampled threads"));
        }
        let sampler: &'static ThreadSampler = Box::leak(Box::new(ThreadSampler {
            index: index as u32,
            tid: AtomicI32::new(0),
            active: AtomicBool::new(false),
            busy: AtomicBool::new(false),
            stack_lo: AtomicU64::new(0),
            stack_hi: AtomicU64::new(0),
            stack_maps: UnsafeCell::new(Box::new([])),
            cache: UnsafeCell::new(NativeCache::new_in()),
            target: UnsafeCell::new(None),
            max_depth,
            timers: Mutex::new(Vec::new()),
        }));
        SAMPLERS[index].store(sampler as *const _ as *mut _, Ordering::Release);
        Ok(sampler)
    }

    /// Prepares the sampler for thread `tid` writing to `slot`'s ring.
    ///
    /// # Safety
    /// No timer may target this sampler while it is reset.
    pub unsafe fn reset(
        &self,
        tid: i32,
        stack: Option<StackBounds>,
        maps: Box<[(u64, u64)]>,
        target: (u32, &'static Slot, ShmRing),
    ) {
        self.tid.store(tid, Ordering::SeqCst);
        let stack = stack.unwrap_or_default();
        self.stack_lo.store(stack.lo, Ordering::SeqCst);
        self.stack_hi.store(stack.hi, Ordering::SeqCst);
        // SAFETY: no handler runs for this sampler (contract).
        unsafe {
            // A handler interrupted by fork (in the parent) left the flag
            // set and maybe the cache half-updated.
            if self.busy.swap(false, Ordering::SeqCst) {
                *self.cache.get() = NativeCache::new_in();
            }
            *self.stack_maps.get() = maps;
            *self.target.get() = Some(target);
        }
        self.active.store(true, Ordering::SeqCst);
    }

    /// The value a timer carries: tag, this sampler's index, and the clock
    /// in the lowest bit.
    pub fn timer_value(&self, clock: TimerClock) -> *mut libc::c_void {
        let tag = usize::from(clock == TimerClock::Realtime);
        (TAG | (self.index as usize) << 1 | tag) as *mut libc::c_void
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

    /// Whether the handler runs on the thread's own stack (its known
    /// bounds hold the handler's frame): then no alternate stack is in
    /// use and [`too_little_alternate_stack`]'s system call is spared.
    /// **Signal handler.**
    fn runs_on_thread_stack(&self) -> bool {
        let marker = 0u8;
        let frame = std::hint::black_box(&marker) as *const u8 as u64;
        let (lo, hi) = (
            self.stack_lo.load(Ordering::Relaxed),
            self.stack_hi.load(Ordering::Relaxed),
        );
        lo < hi && (lo..hi).contains(&frame)
    }

    /// Counts a sample not taken for lack of room on an alternate signal
    /// stack. **Signal handler.**
    fn count_lost_altstack(&self) {
        if self.active.load(Ordering::Acquire)
            && self.tid.load(Ordering::Relaxed) == strobe_core::thread::gettid()
        {
            // SAFETY: set by reset before the sampler became active.
            if let Some((_, slot, _)) = unsafe { &*self.target.get() } {
                slot.lost_altstack.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Takes one sample of the interrupted thread. **Signal handler.**
    /// Never inlined: its frame (the unwinder's state) must not be
    /// reserved before [`too_little_alternate_stack`] has looked.
    ///
    /// # Safety
    /// Must run in the signal handler on the thread this sampler belongs
    /// to, with `ctx` the handler's ucontext.
    #[inline(never)]
    unsafe fn take_sample(&self, ctx: *const libc::c_void, clock: TimerClock, overruns: i32) {
        if !self.active.load(Ordering::Acquire)
            || self.tid.load(Ordering::Relaxed) != strobe_core::thread::gettid()
        {
            return;
        }
        let segment = SEGMENT.load(Ordering::Acquire);
        // SAFETY: published segments are never unmapped in this process.
        let Some(segment) = (unsafe { segment.as_ref() }) else {
            return;
        };
        if segment.header().sampling_on[usize::from(clock == TimerClock::Realtime)]
            .load(Ordering::Relaxed)
            == 0
        {
            return;
        }
        // SAFETY: set by reset before the sampler became active.
        let Some((slot_index, slot, ring)) = (unsafe { &*self.target.get() }) else {
            return;
        };
        if self.busy.swap(true, Ordering::Acquire) {
            slot.lost_reentrant.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let before = BEFORE_SAMPLE.load(Ordering::Acquire);
        if before != 0 {
            // SAFETY: only `set_before_sample` stores here, a `fn()`.
            let before = unsafe { std::mem::transmute::<usize, fn()>(before) };
            before();
        }
        if overruns > 0 {
            slot.overruns.fetch_add(overruns as u64, Ordering::Relaxed);
        }
        let timestamp_ns = now_ns();
        let counters = COUNTER_VALUES.load(Ordering::Acquire);
        let Some(mut reservation) =
            ring.reserve(SAMPLE_HEAD_BYTES + (self.max_depth + counters) * 8)
        else {
            slot.lost_full.fetch_add(1, Ordering::Relaxed);
            self.busy.store(false, Ordering::Release);
            return;
        };
        let bytes = reservation.bytes();
        let (head, frames) = bytes.split_at_mut(SAMPLE_HEAD_BYTES);
        // SAFETY: ring payloads are 8-aligned and hold max_depth frames
        // and the counter values after the head.
        let words = unsafe {
            std::slice::from_raw_parts_mut(
                frames.as_mut_ptr() as *mut u64,
                self.max_depth + counters,
            )
        };
        // SAFETY: contract of this function.
        let regs = unsafe { StartRegs::from_ucontext(ctx) };
        let stack = self.stack_bounds(regs.sp);
        // SAFETY: only this thread's handler uses the cache, and the busy
        // flag excludes nested handlers.
        let cache = unsafe { &mut *self.cache.get() };
        let walked = unwind(regs, stack, cache, &mut words[..self.max_depth]);
        // The counter values go right after the frames.
        let values = &mut words[walked.depth..walked.depth + counters];
        if counters > 0 {
            let hook = COUNTER_HOOK.load(Ordering::Acquire);
            if hook == 0 {
                values.fill(COUNTER_MISSING);
            } else {
                // SAFETY: only `set_sample_counters` stores here, a
                // `fn(u32, &mut [u64])`.
                let hook = unsafe { std::mem::transmute::<usize, fn(u32, &mut [u64])>(hook) };
                hook(*slot_index, values);
            }
        }
        let header = SampleHead {
            timestamp_ns,
            cpu_time_ns: Clock::ThreadCpu.read_ns(),
            peak_rss_kb: peak_rss_kb(),
            tid: self.tid.load(Ordering::Relaxed),
            depth: walked.depth as u16,
            clock: u8::from(clock == TimerClock::Realtime),
            complete: u8::from(walked.complete),
            overruns: overruns.max(0) as u32,
            counters: counters as u16,
            reserved: 0,
        };
        // SAFETY: `head` is SAMPLE_HEAD_BYTES long; write_unaligned needs no
        // alignment.
        unsafe { std::ptr::write_unaligned(head.as_mut_ptr() as *mut SampleHead, header) };
        let tap = SAMPLE_TAP.load(Ordering::Acquire);
        if tap != 0 {
            // SAFETY: only `set_sample_tap` stores here, a `fn(&Sample)`.
            let tap = unsafe { std::mem::transmute::<usize, fn(&Sample<'_>)>(tap) };
            tap(&Sample {
                tid: header.tid,
                timestamp_ns,
                cpu_time_ns: header.cpu_time_ns,
                peak_rss_kb: header.peak_rss_kb,
                clock,
                complete: walked.complete,
                overruns: header.overruns,
                frames: &words[..walked.depth],
                counters: &words[walked.depth..walked.depth + counters],
            });
        }
        let after = AFTER_SAMPLE.load(Ordering::Acquire);
        if after != 0 {
            // SAFETY: only `set_after_sample` stores here, a
            // `fn(u32, &[u64], u32)`.
            let after = unsafe { std::mem::transmute::<usize, fn(u32, &[u64], u32)>(after) };
            after(
                *slot_index,
                &words[..walked.depth],
                header.overruns.saturating_add(1),
            );
        }
        ring.commit(
            reservation,
            SAMPLE_HEAD_BYTES + (walked.depth + counters) * 8,
        );
        slot.taken.fetch_add(1, Ordering::Relaxed);
        if !walked.complete {
            slot.incomplete.fetch_add(1, Ordering::Relaxed);
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

/// The sampler a timer value names, if it is one of strobe's.
/// **Signal handler**: one bounds-checked atomic load.
fn sampler_for(value: usize) -> Option<(&'static ThreadSampler, TimerClock)> {
    if value & TAG_MASK != TAG {
        return None;
    }
    let index = (value & !TAG_MASK) >> 1;
    let p = SAMPLERS.get(index)?.load(Ordering::Acquire);
    // SAFETY: samplers are leaked: a published pointer stays valid.
    let sampler = unsafe { p.as_ref() }?;
    let clock = if value & 1 == 1 {
        TimerClock::Realtime
    } else {
        TimerClock::ThreadCpu
    };
    Some((sampler, clock))
}

const SI_TIMER: i32 = -2;
/// Offsets in x86-64 `siginfo_t` of the POSIX-timer fields.
const SI_OVERRUN_OFFSET: usize = 20;
const SI_VALUE_OFFSET: usize = 24;

/// Whether Go's runtime is in the process (a cgo program exports these).
/// Go requires every signal handler to run on the alternate signal stack
/// (`SA_ONSTACK`): a goroutine's stack is a few KiB and nothing may be
/// pushed below its pointer (sampling a goroutine on it crashed the
/// program). Elsewhere the handler runs on the interrupted thread's own
/// stack: the alternate stacks other programs set up (Rust's: about
/// 8 KiB per thread) are too small for an unwind. Not for signal handlers
/// (`dlsym`).
fn go_in_process() -> bool {
    [c"_cgo_topofstack", c"x_cgo_init", c"crosscall2"]
        .iter()
        // SAFETY: dlsym with the default handle and a NUL-terminated name.
        .any(|name| !unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) }.is_null())
}

/// Installs [`on_signal`] for `signal`. Every signal in `block` is blocked
/// while the handler runs, so the CPU-time and real-time samplers never
/// interrupt each other. The disposition the program had (inherited or set
/// by a library constructor) becomes the program's recorded disposition.
/// Stays installed for the life of the process: a timer signal still
/// queued after a timer is deleted must not meet the default action.
pub(crate) fn install(signal: i32, block: &[i32]) -> io::Result<()> {
    if !(1..=64).contains(&signal) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("signal {signal} is out of range 1..=64"),
        ));
    }
    // A forked child inherits the handler its parent installed, with the
    // same signals blocked: nothing to do (and no `dlsym` to pay for).
    // SAFETY: sigaction is plain old data.
    let mut current: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: querying only, through the real sigaction.
    let queried = unsafe { signals::real_sigaction(signal, std::ptr::null(), &mut current) } == 0;
    let blocks_all = block.iter().all(|&other| {
        // SAFETY: a valid signal set; `other` was range-checked by the caller.
        unsafe { libc::sigismember(&current.sa_mask, other) == 1 }
    });
    if queried && current.sa_sigaction == on_signal as *const () as usize && blocks_all {
        return Ok(());
    }
    // SAFETY: sigaction is plain old data.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = on_signal as *const () as usize;
    action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
    if go_in_process() {
        action.sa_flags |= libc::SA_ONSTACK;
    }
    // SAFETY: valid pointer to the signal mask inside `action`.
    unsafe { libc::sigemptyset(&mut action.sa_mask) };
    for &other in block {
        // SAFETY: as above; `other` was range-checked by the caller.
        unsafe { libc::sigaddset(&mut action.sa_mask, other) };
    }
    // SAFETY: as above.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: valid action and out-pointer; the real sigaction, not the
    // runtime's interposed one.
    if unsafe { signals::real_sigaction(signal, &action, &mut old) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if old.sa_sigaction != on_signal as *const () as usize {
        signals::take_over(signal, &old);
    }
    Ok(())
}

/// Room a sample needs below the handler's frame: the deepest use measured
/// (a debug build, `tests/programs/altstack_room.c`) was 18 KiB; Go's
/// signal stacks hold 32 KiB.
const SAMPLE_STACK_BYTES: usize = 24 << 10;

/// Whether the handler runs on an alternate signal stack with less than
/// [`SAMPLE_STACK_BYTES`] below it. That happens when the timer's signal
/// arrives while the program runs its own handler there, or returns from
/// one with `siglongjmp` (which unblocks signals before it leaves the
/// stack): a sample would overflow the stack (programs size them for
/// their own handler: 8 KiB is common) into whatever lies below.
/// **Signal handler**: one system call.
fn too_little_alternate_stack() -> bool {
    // SAFETY: stack_t is plain old data.
    let mut current: libc::stack_t = unsafe { std::mem::zeroed() };
    // SAFETY: querying the calling thread's alternate stack.
    if unsafe { libc::sigaltstack(std::ptr::null(), &mut current) } != 0
        || current.ss_flags & libc::SS_ONSTACK == 0
    {
        return false;
    }
    let here = &current as *const libc::stack_t as usize;
    here.saturating_sub(current.ss_sp as usize) < SAMPLE_STACK_BYTES
}

/// The handler. **Signal handler**: see the module documentation.
extern "C" fn on_signal(signal: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: errno location of the current thread is always valid.
    let errno = unsafe { libc::__errno_location() };
    // SAFETY: as above.
    let saved_errno = unsafe { *errno };
    // SAFETY: the kernel passes a valid siginfo to SA_SIGINFO handlers.
    let code = unsafe { (*info).si_code };
    let ours = if code == SI_TIMER {
        // SAFETY: for SI_TIMER the siginfo holds the timer's overrun count
        // and sigval at these offsets (x86-64 Linux layout).
        let (overruns, value) = unsafe {
            let base = info as *const u8;
            (
                (base.add(SI_OVERRUN_OFFSET) as *const i32).read(),
                (base.add(SI_VALUE_OFFSET) as *const usize).read(),
            )
        };
        sampler_for(value).map(|(sampler, clock)| (sampler, clock, overruns))
    } else {
        None
    };
    match ours {
        Some((sampler, _, _))
            if !sampler.runs_on_thread_stack() && too_little_alternate_stack() =>
        {
            sampler.count_lost_altstack()
        }
        // SAFETY: we are in the handler on the thread the timer targets
        // (take_sample checks the tid itself).
        Some((sampler, clock, overruns)) => unsafe { sampler.take_sample(ctx, clock, overruns) },
        // Not one of strobe's timers: the program's own disposition.
        None => signals::deliver_to_program(signal, info, ctx),
    }
    // SAFETY: restoring the value saved above.
    unsafe { *errno = saved_errno };
}
