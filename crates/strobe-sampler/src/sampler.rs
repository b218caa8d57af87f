//! The sampler: per-thread timers whose signals write samples into the
//! thread's ring in the process's shared segment.
//!
//! Owns thread registration (a sampler and timers per thread, reused after
//! the thread ends), pause and resume, and stopping before `exec`. Runs no
//! thread and holds no file descriptor: the collector drains the rings and
//! decides, through the segment's `sampling_on` flags, when samples count
//! (delays, durations, time windows). Nothing here runs in a signal
//! handler; the handler lives in `handler.rs`.

use crate::handler::{install, set_segment, ThreadSampler};
use crate::timer::ThreadTimer;
use crate::unwind::StackBounds;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use strobe_wire::sample::TimerClock;
use strobe_wire::segment::Segment;

/// One timer's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimerConfig {
    /// Interrupts per second (of CPU time or of real time).
    pub freq_hz: f64,
    /// The signal it delivers.
    pub signal: i32,
}

impl TimerConfig {
    fn period_ns(&self) -> u64 {
        (1e9 / self.freq_hz).round().max(1.0) as u64
    }
}

/// Everything the sampler can be told.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplerConfig {
    /// The CPU-time timer, if enabled.
    pub cputime: Option<TimerConfig>,
    /// The real-time timer, if enabled.
    pub realtime: Option<TimerConfig>,
    /// Most frames per sample.
    pub max_depth: usize,
}

impl SamplerConfig {
    fn timer(&self, clock: TimerClock) -> Option<&TimerConfig> {
        match clock {
            TimerClock::ThreadCpu => self.cputime.as_ref(),
            TimerClock::Realtime => self.realtime.as_ref(),
        }
    }
}

/// Why the sampler could not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum SamplerError {
    /// A system call failed.
    #[error("{what}: {source}")]
    Os {
        /// What was being done.
        what: String,
        /// The error.
        source: io::Error,
    },
    /// The two timers were given the same signal.
    #[error("the CPU-time and real-time timers both use signal {0}; give them different signals")]
    SameSignal(i32),
    /// A frequency that is not positive.
    #[error("sampling frequency {0} Hz is not positive")]
    BadFrequency(f64),
}

fn os(what: impl Into<String>) -> impl FnOnce(io::Error) -> SamplerError {
    let what = what.into();
    move |source| SamplerError::Os { what, source }
}

struct Shared {
    config: SamplerConfig,
    segment: &'static Segment,
    /// Samplers of live threads.
    live: Mutex<Vec<&'static ThreadSampler>>,
    /// Samplers of ended threads, ready for new ones.
    pool: Mutex<Vec<&'static ThreadSampler>>,
    paused: AtomicBool,
    stopped: AtomicBool,
    threads: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A running sampler. Cheap to clone (shared state).
#[derive(Clone)]
pub struct Sampler {
    shared: Arc<Shared>,
}

impl Sampler {
    /// Installs the signal handlers, builds the unwinder snapshot and
    /// directs samples to `segment`. No thread is sampled until it
    /// registers.
    pub fn start(
        config: SamplerConfig,
        segment: &'static Segment,
    ) -> Result<Sampler, SamplerError> {
        for t in [config.cputime, config.realtime].iter().flatten() {
            if !(t.freq_hz > 0.0 && t.freq_hz.is_finite()) {
                return Err(SamplerError::BadFrequency(t.freq_hz));
            }
        }
        if let (Some(a), Some(b)) = (&config.cputime, &config.realtime) {
            if a.signal == b.signal {
                return Err(SamplerError::SameSignal(a.signal));
            }
        }
        crate::snapshot::refresh_if_changed();
        set_segment(segment);
        let signals: Vec<i32> = [config.cputime, config.realtime]
            .iter()
            .flatten()
            .map(|t| t.signal)
            .collect();
        for &signal in &signals {
            install(signal, &signals)
                .map_err(os(format!("installing the handler for signal {signal}")))?;
        }
        for (i, t) in [config.cputime, config.realtime].iter().enumerate() {
            segment.header().signals[i].store(t.map_or(0, |t| t.signal), Ordering::Release);
        }
        crate::signals::mask_program_handlers();
        Ok(Sampler {
            shared: Arc::new(Shared {
                config,
                segment,
                live: Mutex::new(Vec::new()),
                pool: Mutex::new(Vec::new()),
                paused: AtomicBool::new(false),
                stopped: AtomicBool::new(false),
                threads: AtomicU64::new(0),
            }),
        })
    }

    /// The configuration in use.
    pub fn config(&self) -> &SamplerConfig {
        &self.shared.config
    }

    /// Starts sampling the calling thread into `slot`'s ring. Allocates (a
    /// sampler, timers): call at thread start, never in a handler.
    pub fn register_current_thread(&self, slot: u32) -> Result<(), SamplerError> {
        let tid = strobe_core::thread::gettid();
        self.register(tid, slot, current_stack_bounds())
    }

    /// Starts sampling thread `tid` of this process from another thread (for
    /// threads that existed before strobe loaded). Its stack is found in
    /// the memory map when a sample arrives.
    pub fn register_thread(&self, tid: i32, slot: u32) -> Result<(), SamplerError> {
        self.register(tid, slot, None)
    }

    fn register(
        &self,
        tid: i32,
        slot: u32,
        stack: Option<StackBounds>,
    ) -> Result<(), SamplerError> {
        let shared = &self.shared;
        if shared.stopped.load(Ordering::SeqCst) {
            return Ok(());
        }
        let sampler = match lock(&shared.pool).pop() {
            Some(s) => s,
            None => {
                ThreadSampler::create(shared.config.max_depth).map_err(os("creating a sampler"))?
            }
        };
        let maps = if stack.is_none() {
            writable_mappings()
        } else {
            Box::new([]) as Box<[_]>
        };
        let segment = shared.segment;
        // SAFETY: the sampler came from the pool or is new: no live timer
        // targets it.
        unsafe {
            sampler.reset(
                tid,
                stack,
                maps,
                (slot, segment.slot(slot), segment.sample_ring(slot)),
            )
        };
        let timers = match self.create_timers(sampler, tid) {
            Ok(timers) => timers,
            Err(e) => {
                sampler.active.store(false, Ordering::SeqCst);
                lock(&shared.pool).push(sampler);
                return Err(e);
            }
        };
        *lock(&sampler.timers) = timers;
        lock(&shared.live).push(sampler);
        shared.threads.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Creates the thread's timers, armed unless paused.
    fn create_timers(
        &self,
        sampler: &ThreadSampler,
        tid: i32,
    ) -> Result<Vec<ThreadTimer>, SamplerError> {
        let shared = &self.shared;
        let mut timers = Vec::new();
        for clock in TimerClock::ALL {
            if let Some(t) = shared.config.timer(clock) {
                let timer = ThreadTimer::create(
                    clock,
                    tid,
                    t.signal,
                    sampler.timer_value(clock),
                    t.period_ns(),
                )
                .map_err(os(format!(
                    "creating the {} timer of thread {tid}",
                    clock.name()
                )))?;
                if !shared.paused.load(Ordering::SeqCst) {
                    timer.arm().map_err(os("arming a timer"))?;
                }
                timers.push(timer);
            }
        }
        Ok(timers)
    }

    /// Stops sampling the calling thread. Call before the thread exits.
    pub fn unregister_current_thread(&self) {
        self.unregister(strobe_core::thread::gettid());
    }

    /// Stops sampling thread `tid`.
    pub fn unregister(&self, tid: i32) {
        let mut live = lock(&self.shared.live);
        let Some(i) = live
            .iter()
            .position(|s| s.tid.load(Ordering::SeqCst) == tid && s.active.load(Ordering::SeqCst))
        else {
            return;
        };
        let sampler = live.swap_remove(i);
        drop(live);
        lock(&sampler.timers).clear();
        sampler.active.store(false, Ordering::SeqCst);
        lock(&self.shared.pool).push(sampler);
    }

    fn set_armed(&self, armed: bool) {
        for s in lock(&self.shared.live).iter() {
            for timer in lock(&s.timers).iter() {
                let _ = if armed { timer.arm() } else { timer.disarm() };
            }
        }
    }

    /// Stops all timers until [`resume`](Self::resume).
    pub fn pause(&self) {
        self.shared.paused.store(true, Ordering::SeqCst);
        self.set_armed(false);
    }

    /// Restarts the timers stopped by [`pause`](Self::pause).
    pub fn resume(&self) {
        self.shared.paused.store(false, Ordering::SeqCst);
        if !self.shared.stopped.load(Ordering::SeqCst) {
            self.set_armed(true);
        }
    }

    /// Rebuilds the module snapshot after a library was loaded.
    pub fn modules_changed(&self) {
        crate::snapshot::rebuild(None);
    }

    /// Threads registered so far.
    pub fn threads(&self) -> u64 {
        self.shared.threads.load(Ordering::Relaxed)
    }

    /// Deletes every timer (before `exec`, or for good). Samples already in
    /// the rings stay there for the collector. [`restart`](Self::restart)
    /// undoes it when the `exec` failed.
    pub fn stop(&self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        for s in lock(&self.shared.live).iter() {
            lock(&s.timers).clear();
        }
    }

    /// Re-creates the timers [`stop`](Self::stop) deleted.
    pub fn restart(&self) {
        self.shared.stopped.store(false, Ordering::SeqCst);
        for s in lock(&self.shared.live).iter() {
            let tid = s.tid.load(Ordering::SeqCst);
            if let Ok(timers) = self.create_timers(s, tid) {
                *lock(&s.timers) = timers;
            }
        }
    }

    /// In a forked child: the parent's samplers describe threads that do
    /// not exist here and their timers were not inherited. They are
    /// deactivated, their timers forgotten (not deleted: the ids mean
    /// nothing here) and returned for the child's sampler to reuse
    /// ([`adopt`](Self::adopt)): a sampler is never freed.
    pub fn abandon_after_fork(&self) -> Spare {
        self.shared.stopped.store(true, Ordering::SeqCst);
        let mut spare: Vec<&'static ThreadSampler> = self
            .shared
            .live
            .try_lock()
            .map_or_else(|_| Vec::new(), |mut g| std::mem::take(&mut *g));
        if let Ok(mut pool) = self.shared.pool.try_lock() {
            spare.append(&mut pool);
        }
        spare.retain(|s| {
            s.active.store(false, Ordering::SeqCst);
            match s.timers.try_lock() {
                Ok(mut timers) => {
                    for t in timers.drain(..) {
                        std::mem::forget(t);
                    }
                    true
                }
                // Locked by a thread that does not exist here: never reused.
                Err(_) => false,
            }
        });
        Spare(spare)
    }

    /// Takes a forked parent's samplers into this sampler's pool.
    pub fn adopt(&self, spare: Spare) {
        let max_depth = self.shared.config.max_depth;
        lock(&self.shared.pool).extend(spare.0.into_iter().filter(|s| s.max_depth == max_depth));
    }
}

/// Samplers a forked child inherited from its parent (see
/// [`Sampler::abandon_after_fork`]).
pub struct Spare(Vec<&'static ThreadSampler>);

thread_local! {
    /// The calling thread's stack, once known. A forked child inherits it
    /// with the thread's memory, and the stack is the same there.
    static STACK: std::cell::Cell<Option<StackBounds>> = const { std::cell::Cell::new(None) };
}

/// The calling thread's stack.
fn current_stack_bounds() -> Option<StackBounds> {
    if let Some(known) = STACK.get() {
        return Some(known);
    }
    let found = initial_stack_bounds().or_else(pthread_stack_bounds);
    STACK.set(found);
    found
}

/// The process's initial stack, when the calling thread runs on it. Found
/// from the kernel's layout, without `/proc/self/maps` (which glibc's
/// `pthread_getattr_np` parses for this thread): the executable's name
/// (`AT_EXECFN`) sits just below the stack's end, followed by an 8-byte end
/// marker; the stack may grow down to its resource limit.
fn initial_stack_bounds() -> Option<StackBounds> {
    // SAFETY: getauxval has no preconditions.
    let name = unsafe { libc::getauxval(libc::AT_EXECFN) } as *const libc::c_char;
    if name.is_null() {
        return None;
    }
    // SAFETY: AT_EXECFN points at a NUL-terminated string on the stack.
    let len = unsafe { std::ffi::CStr::from_ptr(name) }.to_bytes().len() as u64;
    let hi = (name as u64 + len + 1 + 8).next_multiple_of(4096);
    // SAFETY: rlimit is plain old data filled by getrlimit.
    let mut limit: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out-pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_STACK, &mut limit) } != 0 {
        return None;
    }
    let size = limit.rlim_cur.min(1 << 30);
    let lo = hi.saturating_sub(size);
    let here = &limit as *const libc::rlimit as u64;
    (lo..hi).contains(&here).then_some(StackBounds { lo, hi })
}

/// The calling thread's stack from `pthread_getattr_np`.
fn pthread_stack_bounds() -> Option<StackBounds> {
    // SAFETY: pthread_attr_t is plain old data filled by the call.
    let mut attr: libc::pthread_attr_t = unsafe { std::mem::zeroed() };
    // SAFETY: querying the calling thread into a valid attr.
    if unsafe { libc::pthread_getattr_np(libc::pthread_self(), &mut attr) } != 0 {
        return None;
    }
    let mut addr: *mut libc::c_void = std::ptr::null_mut();
    let mut size: libc::size_t = 0;
    // SAFETY: attr was initialised by pthread_getattr_np.
    let rc = unsafe { libc::pthread_attr_getstack(&attr, &mut addr, &mut size) };
    // SAFETY: destroying the attr we initialised.
    unsafe { libc::pthread_attr_destroy(&mut attr) };
    (rc == 0).then(|| StackBounds {
        lo: addr as u64,
        hi: addr as u64 + size as u64,
    })
}

/// Readable and writable mappings of this process, sorted by start.
fn writable_mappings() -> Box<[(u64, u64)]> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let mut out: Vec<(u64, u64)> = maps
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let range = fields.next()?;
            let perms = fields.next()?;
            if !perms.starts_with("rw") {
                return None;
            }
            let (a, b) = range.split_once('-')?;
            Some((
                u64::from_str_radix(a, 16).ok()?,
                u64::from_str_radix(b, 16).ok()?,
            ))
        })
        .collect();
    out.sort_unstable();
    out.into_boxed_slice()
}
