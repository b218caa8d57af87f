//! The sampler: per-thread timers feeding per-thread rings, drained by
//! allocator threads into a [`SampleSink`].
//!
//! Owns thread registration, the allocator threads (each serving at most
//! `allocator_size` threads, a new one started when all are full), the
//! control of timers by delay, duration, time windows and pause, temporary
//! spool files, and shutdown. Nothing here runs in a signal handler; the
//! handler lives in `handler.rs`.

use crate::handler::{install, register_sampler, ThreadSampler};
use crate::record::{decode, SampleSink, HEADER_BYTES};
use crate::snapshot;
use crate::timer::{ThreadTimer, TimerClock};
use crate::unwind::StackBounds;
use std::io::{self, BufWriter, Read, Seek, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;
use strobe_core::clock::now_ns;
use strobe_core::settings::{Key, Settings};
use strobe_core::thread::{register_current, ThreadRole};
use strobe_core::timewindow::{KernelClocks, TimeWindows, WindowEvaluator, WindowState};

/// One timer's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimerConfig {
    /// Interrupts per second (of CPU time or of real time).
    pub freq_hz: f64,
    /// Nanoseconds after start before the timer runs.
    pub delay_ns: u64,
    /// Nanoseconds the timer runs after its delay; 0 = until the end.
    pub duration_ns: u64,
    /// The signal it delivers.
    pub signal: i32,
}

impl TimerConfig {
    fn period_ns(&self) -> u64 {
        (1e9 / self.freq_hz).round().max(1.0) as u64
    }

    fn runs_at(&self, elapsed_ns: u64) -> bool {
        elapsed_ns >= self.delay_ns
            && (self.duration_ns == 0 || elapsed_ns < self.delay_ns + self.duration_ns)
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
    /// Ring size per thread, in typical samples (256 bytes each).
    pub buffer_samples: usize,
    /// Most threads one allocator thread serves.
    pub allocator_size: usize,
    /// Spool samples to temporary files in this directory and deliver them
    /// when the sampler stops; `None` delivers while the program runs.
    pub temp_dir: Option<PathBuf>,
    /// Time windows during which the timers run.
    pub windows: TimeWindows,
    /// How often allocator threads drain rings and apply timer control.
    pub poll_interval: Duration,
}

impl SamplerConfig {
    /// The sampler's configuration from strobe's settings.
    pub fn from_settings(s: &Settings) -> SamplerConfig {
        let timer = |on: Key, freq: Key, delay: Key, duration: Key, signal: Key| {
            (s.bool(Key::UseSampling) && s.bool(on)).then(|| TimerConfig {
                freq_hz: s.float(freq),
                delay_ns: s.duration_ns(delay),
                duration_ns: s.duration_ns(duration),
                signal: s.int(signal) as i32,
            })
        };
        SamplerConfig {
            cputime: timer(
                Key::SamplingCputime,
                Key::SamplingCputimeFreq,
                Key::SamplingCputimeDelay,
                Key::SamplingCputimeDuration,
                Key::SamplingCputimeSignal,
            ),
            realtime: timer(
                Key::SamplingRealtime,
                Key::SamplingRealtimeFreq,
                Key::SamplingRealtimeDelay,
                Key::SamplingRealtimeDuration,
                Key::SamplingRealtimeSignal,
            ),
            max_depth: s.int(Key::SamplingDepth) as usize,
            buffer_samples: s.int(Key::SamplingBufferSamples) as usize,
            allocator_size: s.int(Key::SamplingAllocatorSize) as usize,
            temp_dir: s.bool(Key::UseTemporaryFiles).then(|| {
                s.path(Key::Tmpdir)
                    .map(PathBuf::from)
                    .unwrap_or_else(std::env::temp_dir)
            }),
            windows: s.windows(Key::TracePeriods).clone(),
            poll_interval: Duration::from_millis(20),
        }
    }

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
    /// More threads were ever sampled than the handler's table holds.
    #[error("more than 65536 sampled threads at once; this thread is not sampled")]
    TooManyThreads,
}

fn os(what: impl Into<String>) -> impl FnOnce(io::Error) -> SamplerError {
    let what = what.into();
    move |source| SamplerError::Os { what, source }
}

/// Totals over every thread sampled so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SamplerStats {
    /// Samples recorded.
    pub samples: u64,
    /// Samples dropped because a thread's ring was full.
    pub lost_ring_full: u64,
    /// Samples dropped because a handler was still running on the thread.
    pub lost_reentrant: u64,
    /// Timer expirations the kernel merged (not sampled).
    pub timer_overruns: u64,
    /// Samples whose unwind stopped before the outermost frame.
    pub incomplete: u64,
    /// Threads registered.
    pub threads: u64,
}

struct Allocator {
    wake_fd: i32,
    samplers: Mutex<Vec<Arc<ThreadSampler>>>,
    spool: Mutex<Option<BufWriter<std::fs::File>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

struct Shared {
    config: SamplerConfig,
    sink: Arc<dyn SampleSink>,
    allocators: Mutex<Vec<Arc<Allocator>>>,
    pool: Mutex<Vec<Arc<ThreadSampler>>>,
    windows: Mutex<WindowEvaluator>,
    start_ns: u64,
    paused: AtomicBool,
    stopping: AtomicBool,
    /// Counters of samplers that went back to the pool.
    retired: [AtomicU64; 5],
    threads: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Samplers whose timers may still have signals in flight are never freed:
/// they are parked here for the life of the process.
static GRAVEYARD: Mutex<Vec<Arc<ThreadSampler>>> = Mutex::new(Vec::new());

/// A running sampler. Cheap to clone (shared state).
#[derive(Clone)]
pub struct Sampler {
    shared: Arc<Shared>,
}

impl Sampler {
    /// Installs the signal handlers and the unwinder snapshot. No thread is
    /// sampled until it registers.
    pub fn start(
        config: SamplerConfig,
        sink: Arc<dyn SampleSink>,
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
        snapshot::rebuild(None);
        let signals: Vec<i32> = [config.cputime, config.realtime]
            .iter()
            .flatten()
            .map(|t| t.signal)
            .collect();
        for &signal in &signals {
            install(signal, &signals)
                .map_err(os(format!("installing the handler for signal {signal}")))?;
        }
        let windows = WindowEvaluator::start(&config.windows, &KernelClocks);
        Ok(Sampler {
            shared: Arc::new(Shared {
                config,
                sink,
                allocators: Mutex::new(Vec::new()),
                pool: Mutex::new(Vec::new()),
                windows: Mutex::new(windows),
                start_ns: now_ns(),
                paused: AtomicBool::new(false),
                stopping: AtomicBool::new(false),
                retired: Default::default(),
                threads: AtomicU64::new(0),
            }),
        })
    }

    /// The configuration in use.
    pub fn config(&self) -> &SamplerConfig {
        &self.shared.config
    }

    /// Starts sampling the calling thread. Allocates (a ring, timers, maybe
    /// an allocator thread): call at thread start, never in a handler.
    pub fn register_current_thread(&self) -> Result<(), SamplerError> {
        register_current(ThreadRole::Program);
        let tid = strobe_core::thread::gettid();
        self.register(tid, current_stack_bounds())
    }

    /// Starts sampling thread `tid` of this process from another thread (for
    /// threads that existed before strobe loaded). Its stack is found in
    /// the memory map when a sample arrives.
    pub fn register_thread(&self, tid: i32) -> Result<(), SamplerError> {
        self.register(tid, None)
    }

    fn register(&self, tid: i32, stack: Option<StackBounds>) -> Result<(), SamplerError> {
        let shared = &self.shared;
        if shared.stopping.load(Ordering::SeqCst) {
            return Ok(());
        }
        let allocator = self.allocator_with_room()?;
        let sampler = match lock(&shared.pool).pop() {
            Some(s) => s,
            None => {
                let fresh = Arc::new(
                    ThreadSampler::new(
                        shared.config.buffer_samples * 256
                            + HEADER_BYTES
                            + shared.config.max_depth * 8,
                        shared.config.max_depth,
                    )
                    .map_err(os("mapping a sample ring"))?,
                );
                if !register_sampler(Arc::as_ptr(&fresh)) {
                    return Err(SamplerError::TooManyThreads);
                }
                fresh
            }
        };
        let maps = if stack.is_none() {
            writable_mappings()
        } else {
            Box::new([]) as Box<[_]>
        };
        // SAFETY: the sampler came from the pool or is new: no live timer
        // targets it.
        unsafe { sampler.reset(tid, stack, maps, allocator.wake_fd) };
        let timers = match self.create_timers(&sampler, tid) {
            Ok(timers) => timers,
            Err(e) => {
                // A timer may have fired already: the sampler must stay valid.
                sampler.active.store(false, Ordering::SeqCst);
                lock(&shared.pool).push(sampler);
                return Err(e);
            }
        };
        *lock(&sampler.timers) = timers;
        let mut samplers = lock(&allocator.samplers);
        if shared.stopping.load(Ordering::SeqCst) {
            // stop() ran meanwhile and will not see this sampler: undo.
            lock(&sampler.timers).clear();
            sampler.active.store(false, Ordering::SeqCst);
            drop(samplers);
            lock(&GRAVEYARD).push(sampler);
            return Ok(());
        }
        samplers.push(sampler);
        shared.threads.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Creates the thread's timers and arms those that should run now.
    fn create_timers(
        &self,
        sampler: &ThreadSampler,
        tid: i32,
    ) -> Result<Vec<ThreadTimer>, SamplerError> {
        let shared = &self.shared;
        let mut timers = Vec::new();
        let elapsed = now_ns() - shared.start_ns;
        let windows_on = lock(&shared.windows).is_on(&KernelClocks);
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
                if self.timer_should_run(clock, elapsed, windows_on) {
                    timer.arm().map_err(os("arming a timer"))?;
                }
                timers.push(timer);
            }
        }
        Ok(timers)
    }

    fn timer_should_run(&self, clock: TimerClock, elapsed_ns: u64, windows_on: bool) -> bool {
        let shared = &self.shared;
        windows_on
            && !shared.paused.load(Ordering::SeqCst)
            && !shared.stopping.load(Ordering::SeqCst)
            && shared
                .config
                .timer(clock)
                .is_some_and(|t| t.runs_at(elapsed_ns))
    }

    fn allocator_with_room(&self) -> Result<Arc<Allocator>, SamplerError> {
        let mut allocators = lock(&self.shared.allocators);
        if let Some(a) = allocators
            .iter()
            .find(|a| lock(&a.samplers).len() < self.shared.config.allocator_size)
        {
            return Ok(a.clone());
        }
        // SAFETY: eventfd has no memory preconditions.
        let wake_fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if wake_fd < 0 {
            return Err(os("creating an eventfd")(io::Error::last_os_error()));
        }
        let spool = match &self.shared.config.temp_dir {
            Some(dir) => Some(BufWriter::new(tempfile_in(dir).map_err(os(format!(
                "creating a temporary file in {}",
                dir.display()
            )))?)),
            None => None,
        };
        let allocator = Arc::new(Allocator {
            wake_fd,
            samplers: Mutex::new(Vec::new()),
            spool: Mutex::new(spool),
            thread: Mutex::new(None),
        });
        let index = allocators.len();
        let handle = {
            let sampler = self.clone();
            let allocator = allocator.clone();
            std::thread::Builder::new()
                .name(format!("strobe-alloc-{index}"))
                .spawn(move || sampler.allocator_loop(&allocator))
                .map_err(os("starting an allocator thread"))?
        };
        *lock(&allocator.thread) = Some(handle);
        allocators.push(allocator.clone());
        Ok(allocator)
    }

    fn allocator_loop(&self, allocator: &Allocator) {
        register_current(ThreadRole::Strobe);
        let interval_ms = self.shared.config.poll_interval.as_millis().max(1) as i32;
        loop {
            let mut pfd = libc::pollfd {
                fd: allocator.wake_fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut pfd, 1, interval_ms) };
            let mut counter = 0u64;
            // SAFETY: reading 8 bytes into a local from our eventfd.
            unsafe {
                libc::read(
                    allocator.wake_fd,
                    &mut counter as *mut u64 as *mut libc::c_void,
                    8,
                )
            };
            if self.shared.stopping.load(Ordering::SeqCst) {
                return;
            }
            snapshot::refresh_if_changed();
            self.control(allocator);
            self.drain(allocator);
        }
    }

    /// Arms or disarms this allocator's timers by delay, duration, time
    /// windows and pause state.
    fn control(&self, allocator: &Allocator) {
        let elapsed = now_ns() - self.shared.start_ns;
        let windows_on = {
            let mut w = lock(&self.shared.windows);
            w.status(&KernelClocks).state == WindowState::On
        };
        let samplers = lock(&allocator.samplers);
        for s in samplers.iter() {
            let timers = lock(&s.timers);
            for (timer, clock) in timers.iter().zip(self.enabled_clocks()) {
                let _ = if self.timer_should_run(clock, elapsed, windows_on) {
                    timer.arm_if_idle()
                } else {
                    timer.disarm_if_armed()
                };
            }
        }
    }

    fn enabled_clocks(&self) -> impl Iterator<Item = TimerClock> + '_ {
        TimerClock::ALL
            .into_iter()
            .filter(|c| self.shared.config.timer(*c).is_some())
    }

    /// Moves every record out of this allocator's rings.
    fn drain(&self, allocator: &Allocator) {
        let samplers = lock(&allocator.samplers);
        let mut spool = lock(&allocator.spool);
        for s in samplers.iter() {
            drain_ring(s, &*self.shared.sink, spool.as_mut());
        }
    }

    /// Stops sampling the calling thread and flushes its samples. Call
    /// before the thread exits.
    pub fn unregister_current_thread(&self) {
        self.unregister(strobe_core::thread::gettid());
    }

    /// Stops sampling thread `tid` and flushes its samples.
    pub fn unregister(&self, tid: i32) {
        let allocators = lock(&self.shared.allocators).clone();
        for allocator in allocators {
            let mut samplers = lock(&allocator.samplers);
            let Some(i) = samplers.iter().position(|s| {
                s.tid.load(Ordering::SeqCst) == tid && s.active.load(Ordering::SeqCst)
            }) else {
                continue;
            };
            let sampler = samplers.swap_remove(i);
            lock(&sampler.timers).clear();
            sampler.active.store(false, Ordering::SeqCst);
            drain_ring(
                &sampler,
                &*self.shared.sink,
                lock(&allocator.spool).as_mut(),
            );
            self.retire(&sampler);
            lock(&self.shared.pool).push(sampler);
            return;
        }
    }

    fn retire(&self, sampler: &ThreadSampler) {
        let c = &sampler.counters;
        for (total, counter) in self.shared.retired.iter().zip([
            &c.taken,
            &c.lost_full,
            &c.lost_reentrant,
            &c.overruns,
            &c.incomplete,
        ]) {
            total.fetch_add(counter.swap(0, Ordering::SeqCst), Ordering::SeqCst);
        }
    }

    /// Stops all timers until [`resume`](Self::resume).
    pub fn pause(&self) {
        self.shared.paused.store(true, Ordering::SeqCst);
        for a in lock(&self.shared.allocators).iter() {
            self.control(a);
        }
    }

    /// Restarts the timers stopped by [`pause`](Self::pause).
    pub fn resume(&self) {
        self.shared.paused.store(false, Ordering::SeqCst);
        for a in lock(&self.shared.allocators).iter() {
            self.control(a);
        }
    }

    /// Rebuilds the module snapshot after a library was loaded.
    pub fn modules_changed(&self) {
        snapshot::rebuild(None);
    }

    /// Totals so far.
    pub fn stats(&self) -> SamplerStats {
        let mut totals: Vec<u64> = self
            .shared
            .retired
            .iter()
            .map(|a| a.load(Ordering::SeqCst))
            .collect();
        for a in lock(&self.shared.allocators).iter() {
            for s in lock(&a.samplers).iter() {
                let c = &s.counters;
                for (t, v) in totals.iter_mut().zip([
                    &c.taken,
                    &c.lost_full,
                    &c.lost_reentrant,
                    &c.overruns,
                    &c.incomplete,
                ]) {
                    *t += v.load(Ordering::SeqCst);
                }
            }
        }
        SamplerStats {
            samples: totals[0],
            lost_ring_full: totals[1],
            lost_reentrant: totals[2],
            timer_overruns: totals[3],
            incomplete: totals[4],
            threads: self.shared.threads.load(Ordering::SeqCst),
        }
    }

    /// Stops every timer, delivers every sample (spooled ones included),
    /// ends the allocator threads and returns the totals.
    pub fn stop(&self) -> SamplerStats {
        if self.shared.stopping.swap(true, Ordering::SeqCst) {
            return self.stats();
        }
        let allocators = lock(&self.shared.allocators).clone();
        for a in &allocators {
            for s in lock(&a.samplers).iter() {
                lock(&s.timers).clear();
            }
            let one = 1u64;
            // SAFETY: 8 bytes to our own eventfd.
            unsafe { libc::write(a.wake_fd, &one as *const u64 as *const libc::c_void, 8) };
            if let Some(handle) = lock(&a.thread).take() {
                let _ = handle.join();
            }
        }
        for a in &allocators {
            let samplers = std::mem::take(&mut *lock(&a.samplers));
            let mut spool = lock(&a.spool);
            for s in &samplers {
                s.active.store(false, Ordering::SeqCst);
                drain_ring(s, &*self.shared.sink, spool.as_mut());
                self.retire(s);
            }
            if let Some(file) = spool.take() {
                replay_spool(file, &*self.shared.sink);
            }
            for sampler in &samplers {
                sampler.forget_wake_fd();
            }
            // SAFETY: closing our eventfd once; its allocator thread ended
            // and no sampler refers to it any more.
            unsafe { libc::close(a.wake_fd) };
            lock(&GRAVEYARD).extend(samplers);
        }
        lock(&GRAVEYARD).extend(std::mem::take(&mut *lock(&self.shared.pool)));
        self.stats()
    }
}

impl ThreadTimer {
    fn arm_if_idle(&self) -> io::Result<()> {
        if self.is_armed()? {
            return Ok(());
        }
        self.arm()
    }

    fn disarm_if_armed(&self) -> io::Result<()> {
        if self.is_armed()? {
            self.disarm()?;
        }
        Ok(())
    }
}

fn drain_ring(
    sampler: &ThreadSampler,
    sink: &dyn SampleSink,
    spool: Option<&mut BufWriter<std::fs::File>>,
) {
    match spool {
        Some(file) => {
            sampler.ring.drain(|payload| {
                let _ = file
                    .write_all(&(payload.len() as u32).to_le_bytes())
                    .and_then(|()| file.write_all(payload));
            });
        }
        None => {
            sampler.ring.drain(|payload| {
                if let Some(sample) = decode(payload) {
                    sink.deliver(&sample);
                }
            });
        }
    }
    sampler.wake_sent.store(false, Ordering::SeqCst);
}

fn replay_spool(file: BufWriter<std::fs::File>, sink: &dyn SampleSink) {
    let Ok(mut file) = file.into_inner() else {
        return;
    };
    if file.rewind().is_err() {
        return;
    }
    let mut reader = io::BufReader::new(file);
    // 8-aligned scratch so decoded frames are aligned.
    let mut scratch: Vec<u64> = Vec::new();
    loop {
        let mut len = [0u8; 4];
        if reader.read_exact(&mut len).is_err() {
            return;
        }
        let len = u32::from_le_bytes(len) as usize;
        scratch.resize(len.div_ceil(8), 0);
        // SAFETY: the Vec<u64> holds at least `len` bytes.
        let bytes = unsafe { std::slice::from_raw_parts_mut(scratch.as_mut_ptr() as *mut u8, len) };
        if reader.read_exact(bytes).is_err() {
            return;
        }
        if let Some(sample) = decode(bytes) {
            sink.deliver(&sample);
        }
    }
}

/// An unnamed temporary file (`O_TMPFILE`, or created and unlinked).
fn tempfile_in(dir: &std::path::Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let tmpfile = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .open(dir);
    if tmpfile.is_ok() {
        return tmpfile;
    }
    let path = dir.join(format!(
        "strobe-samples-{}-{}",
        std::process::id(),
        now_ns()
    ));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(file)
}

/// The calling thread's stack from `pthread_getattr_np`.
fn current_stack_bounds() -> Option<StackBounds> {
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
