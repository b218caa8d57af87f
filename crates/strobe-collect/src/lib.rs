//! `strobe-collect`: the collector. The profiled program only produces;
//! the collector, in its own process (the `strobe sample` launcher), does
//! everything else.
//!
//! Each runtime hands over its process's shared segment and a pidfd
//! ([`listen`]). Two threads share the work:
//! * the collector thread copies every process's rings into batches
//!   ([`tap`]): at once again while records keep arriving, every few
//!   milliseconds when all is quiet. It also sets the samplers' on/off
//!   flags from delays, durations and time windows, waits for children
//!   their parents announced, and ends a process image when its pidfd says
//!   it ended or when its pid shows up with a new segment after `exec`;
//! * the writer thread decodes the batches into each process's database
//!   ([`process`], [`profile`]) in the run directory.
//!
//! The producers therefore wait only for a copy, never for SQLite; at most
//! [`QUEUE_LIMIT`] bytes wait for the writer (then the rings fill and
//! lossless producers wait). What could not be profiled is reported,
//! never silent.
//!
//! Owns the two threads and the run's report. Never runs inside the
//! profiled program.

mod kernel;
mod kernel_writer;
mod listen;
mod maps;
mod process;
mod profile;
mod tap;
mod trace_types;

use process::Process;
use std::collections::{HashMap, HashSet};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use strobe_core::shm::segment::Segment;
use tap::{Batch, Tap};

pub use kernel::perf::Events as KernelEvents;

/// Bytes of copied records that may wait for the writer.
pub const QUEUE_LIMIT: usize = 512 << 20;
/// How long after a burst of records (more than [`BURST_BYTES`] in one
/// pass) the collector keeps looking at [`BUSY_POLL`] intervals rather
/// than the idle poll interval. Sampling alone never makes a burst.
const BUSY_NS: u64 = 20_000_000;
const BUSY_POLL: Duration = Duration::from_micros(100);
const BURST_BYTES: usize = 16 << 10;
use strobe_core::timewindow::TimeWindows;

/// When one sampler's samples count, relative to each process's start.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timing {
    /// Nothing counts before this.
    pub delay_ns: u64,
    /// Nothing counts after delay + this (0 = until the end).
    pub duration_ns: u64,
}

/// What the collector needs to know.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where databases go (`<run_dir>/<db name from the runtime>`),
    /// created when the first database is.
    pub run_dir: Arc<RunDir>,
    /// How often each database commits.
    pub flush_interval: Duration,
    /// CPU-time and real-time sampler timing.
    pub timing: [Timing; 2],
    /// Time windows during which samples count.
    pub windows: TimeWindows,
    /// Rows of `strobe_settings` every database gets (the resolved
    /// settings).
    pub settings: Vec<(String, String)>,
    /// How often the rings are drained.
    pub poll_interval: Duration,
    /// Most frames kept per kernel sample.
    pub max_depth: usize,
    /// Kernel samples of processes that have the runtime are kept (the
    /// runtime's own sampler is off); otherwise only processes without it
    /// are sampled by the kernel.
    pub kernel_for_all: bool,
    /// The kernel samples threads found blocking the sampling signal, at
    /// this rate and stack size (`sampler = auto`); `None`: it does not.
    pub kernel_threads: Option<KernelThreads>,
}

/// How the kernel samples single threads.
#[derive(Debug, Clone, Copy)]
pub struct KernelThreads {
    pub freq_hz: u64,
    pub stack_bytes: u32,
}

/// The run's directory, made on first use: a run that records nothing
/// leaves no directory behind.
pub struct RunDir {
    make: Box<dyn Fn() -> std::io::Result<PathBuf> + Send + Sync>,
    made: std::sync::OnceLock<Result<PathBuf, String>>,
}

impl RunDir {
    /// A directory `make` creates (once) when first needed.
    pub fn new(make: impl Fn() -> std::io::Result<PathBuf> + Send + Sync + 'static) -> RunDir {
        RunDir {
            make: Box::new(make),
            made: std::sync::OnceLock::new(),
        }
    }

    /// The directory, created now if it was not yet.
    pub fn path(&self) -> Result<&Path, String> {
        match self
            .made
            .get_or_init(|| (self.make)().map_err(|e| e.to_string()))
        {
            Ok(p) => Ok(p),
            Err(e) => Err(e.clone()),
        }
    }

    /// The directory, if it was created.
    pub fn created(&self) -> Option<PathBuf> {
        self.made.get().and_then(|r| r.as_ref().ok()).cloned()
    }
}

impl std::fmt::Debug for RunDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunDir")
            .field("created", &self.created())
            .finish()
    }
}

/// What the run produced.
#[derive(Debug, Default, Clone)]
pub struct Report {
    /// Every database kept.
    pub databases: Vec<PathBuf>,
    /// Messages about what was not profiled or not recorded, each naming
    /// its process.
    pub notes: Vec<String>,
}

struct Shared {
    options: Options,
    report: Mutex<Report>,
    /// The launched program ended: stop once no process is left.
    program_done: AtomicBool,
    /// Stop now, whatever is still running (the user interrupted).
    interrupted: AtomicBool,
    /// Processes followed now: (pid, command; `None` for a child that has
    /// not connected yet).
    live: Mutex<Vec<(i32, Option<String>)>>,
    /// An eventfd that wakes the collector thread's `poll`.
    wake: OwnedFd,
    /// Set (and notified) when the collector thread returns.
    done: (Mutex<bool>, Condvar),
    /// Bytes of batches sent to the writer and not yet written.
    queued: AtomicUsize,
    /// Kernel sampling events to drain, once the launcher opened them.
    kernel: Mutex<Option<KernelEvents>>,
}

impl Shared {
    fn wake(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writing 8 bytes to our eventfd.
        unsafe { libc::write(self.wake.as_raw_fd(), one.as_ptr().cast(), 8) };
    }
}

/// Marks the collector finished when the thread returns, however it
/// returns.
struct DoneOnDrop<'a>(&'a Shared);

impl Drop for DoneOnDrop<'_> {
    fn drop(&mut self) {
        *lock(&self.0.done.0) = true;
        self.0.done.1.notify_all();
    }
}

/// A running collector.
pub struct Collector {
    name: String,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// Why the collector could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot start the collector: {0}")]
pub struct StartError(#[from] std::io::Error);

impl Collector {
    /// Listens for runtimes and starts the collector thread.
    pub fn start(options: Options) -> Result<Collector, StartError> {
        let listener = listen::Listener::bind()?;
        let name = listener.name().to_string();
        // SAFETY: eventfd with constant flags.
        let wake = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if wake < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        let shared = Arc::new(Shared {
            options,
            report: Mutex::new(Report::default()),
            program_done: AtomicBool::new(false),
            interrupted: AtomicBool::new(false),
            live: Mutex::new(Vec::new()),
            // SAFETY: a descriptor we just created and own.
            wake: unsafe { OwnedFd::from_raw_fd(wake) },
            done: (Mutex::new(false), Condvar::new()),
            queued: AtomicUsize::new(0),
            kernel: Mutex::new(None),
        });
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("strobe-collector".into())
                .spawn(move || {
                    let _done = DoneOnDrop(&shared);
                    run(&listener, &shared)
                })?
        };
        Ok(Collector {
            name,
            shared,
            thread: Some(thread),
        })
    }

    /// The socket name runtimes connect to (`STROBE_INTERNAL_COLLECTOR`).
    pub fn address(&self) -> &str {
        &self.name
    }

    /// Processes still followed: (pid, command).
    pub fn live(&self) -> Vec<(i32, String)> {
        let live = lock(&self.shared.live).clone();
        live.into_iter()
            .map(|(pid, command)| (pid, command.unwrap_or_else(|| comm(pid))))
            .collect()
    }

    /// Drains and records `events` (opened by the launcher for the program
    /// it is about to start) until the run ends.
    pub fn sample_kernel(&self, events: KernelEvents) {
        *lock(&self.shared.kernel) = Some(events);
        self.shared.wake();
    }

    /// The launched program ended: finish once every process it started
    /// has ended too.
    pub fn program_done(&self) {
        self.shared.program_done.store(true, Ordering::SeqCst);
        self.shared.wake();
    }

    /// Stop following running processes (their databases are finished
    /// with what was collected).
    pub fn interrupt(&self) {
        self.shared.interrupted.store(true, Ordering::SeqCst);
        self.shared.wake();
    }

    /// Waits at most `timeout` for the collector thread to finish; returns
    /// whether it has.
    pub fn wait_finished(&self, timeout: Duration) -> bool {
        let (done, cv) = &self.shared.done;
        let guard = lock(done);
        let (guard, _) = cv
            .wait_timeout_while(guard, timeout, |finished| !*finished)
            .unwrap_or_else(|e| e.into_inner());
        *guard
    }

    /// Waits for the collector to finish and returns what the run produced.
    pub fn wait(mut self) -> Report {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        std::mem::take(&mut *self.shared.report.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the collector thread tells the writer thread, in order.
enum ToWriter {
    /// A new process image (its segment arrived).
    Started {
        id: u64,
        pid: i32,
        segment: Arc<Segment>,
    },
    /// Records of image `id`.
    Records { id: u64, batch: Batch },
    /// Image `id` ended (`superseded`: its pid runs a new image).
    Ended { id: u64, superseded: bool },
    /// Records of the kernel's sampling rings.
    Kernel { batch: Batch },
    /// The kernel samples thread `tid` of `pid` (which has the runtime).
    KernelThread { pid: i32, tid: i32 },
}

/// The writer thread: records batches, finishes ended images and adds
/// their results to the report.
fn write(shared: &Shared, from: mpsc::Receiver<ToWriter>) {
    let options = &shared.options;
    let mut processes: HashMap<u64, Process> = HashMap::new();
    let mut kernel = kernel_writer::KernelWriter::default();
    for message in from {
        match message {
            ToWriter::Started { id, pid, segment } => {
                kernel.runtime_started(pid, id);
                processes.insert(id, Process::new(pid, segment));
            }
            ToWriter::KernelThread { pid, tid } => kernel.thread_sampled(pid, tid),
            ToWriter::Kernel { batch } => {
                let weight = batch.weight();
                for ended in kernel.apply(&batch, &mut processes, options) {
                    report_finished(shared, ended, false);
                }
                shared.queued.fetch_sub(weight, Ordering::SeqCst);
            }
            ToWriter::Records { id, batch } => {
                let weight = batch.weight();
                if let Some(p) = processes.get_mut(&id) {
                    p.apply(batch, options);
                }
                shared.queued.fetch_sub(weight, Ordering::SeqCst);
            }
            ToWriter::Ended { id, superseded } => {
                kernel.runtime_ended(id);
                if let Some(p) = processes.remove(&id) {
                    report_finished(shared, p, superseded);
                }
            }
        }
    }
    let (rest, lost) = kernel.finish();
    for p in rest {
        report_finished(shared, p, false);
    }
    if lost > 0 {
        lock(&shared.report).notes.push(format!(
            "the kernel dropped {lost} sample records (its rings were full)"
        ));
    }
}

/// Finishes `p` and adds its database and notes to the report.
fn report_finished(shared: &Shared, p: Process, superseded: bool) {
    let (pid, command) = (p.pid, p.command());
    let (db, notes) = p.finish(&shared.options, superseded);
    let mut report = lock(&shared.report);
    report.databases.extend(db);
    for n in notes {
        report.notes.push(format!("pid {pid} ({command}): {n}"));
    }
}

/// The collector thread's side of one run: the followed images and the
/// way to the writer.
struct Taps<'a> {
    shared: &'a Shared,
    taps: Vec<Tap>,
    expected: Expected,
    to_writer: mpsc::Sender<ToWriter>,
    next_id: u64,
    /// Kernel events of single threads the in-program sampler cannot
    /// reach.
    thread_events: Vec<KernelEvents>,
}

impl Taps<'_> {
    /// Copies `tap`'s rings and sends what they held; returns the bytes
    /// copied.
    fn drain(&mut self, i: usize) -> usize {
        let mut batch = Batch::default();
        let (mut children, mut blocking) = (Vec::new(), Vec::new());
        self.taps[i].drain(&mut batch, &mut children, &mut blocking);
        for child in children {
            self.expected.announce(child);
        }
        for tid in blocking {
            let pid = self.taps[i].pid;
            batch.notes.push(self.sample_thread_by_kernel(pid, tid));
        }
        if batch.is_empty() {
            return 0;
        }
        let weight = batch.weight();
        self.shared.queued.fetch_add(weight, Ordering::SeqCst);
        let id = self.taps[i].id;
        let _ = self.to_writer.send(ToWriter::Records { id, batch });
        weight
    }

    /// A thread of `pid` blocks the sampling signal: the kernel samples it
    /// from now on, if it can. Returns the note for the run summary.
    fn sample_thread_by_kernel(&mut self, pid: i32, tid: i32) -> String {
        let options = &self.shared.options;
        let not_sampled =
            format!("thread {tid} blocked the sampling signal: not sampled while it was blocked");
        let Some(kernel) = options.kernel_threads else {
            return not_sampled;
        };
        match KernelEvents::for_thread(tid, kernel.freq_hz, kernel.stack_bytes, 64) {
            Ok(events) => {
                self.thread_events.push(events);
                let _ = self.to_writer.send(ToWriter::KernelThread { pid, tid });
                format!(
                    "thread {tid} blocked the sampling signal: sampled by the kernel from then on \
                     (the first 50 ms were not sampled)"
                )
            }
            Err(e) => format!("{not_sampled}; kernel sampling of it failed: {e}"),
        }
    }

    /// Copies the kernel's sampling rings and sends what they held.
    fn drain_kernel(&mut self, events: &mut KernelEvents) {
        let mut batch = Batch::default();
        for ring in events.rings() {
            ring.drain(|record| batch.push_kernel(record));
        }
        if batch.is_empty() {
            return;
        }
        self.shared
            .queued
            .fetch_add(batch.weight(), Ordering::SeqCst);
        let _ = self.to_writer.send(ToWriter::Kernel { batch });
    }

    /// Copies the rings of the single-thread kernel events.
    fn drain_thread_events(&mut self) {
        let mut events = std::mem::take(&mut self.thread_events);
        for e in &mut events {
            self.drain_kernel(e);
        }
        self.thread_events = events;
    }

    /// Copies the rings a last time and ends image `i`.
    fn end(&mut self, i: usize, superseded: bool) {
        self.drain(i);
        // Again: the first pass may have freed slots whose events came last.
        self.drain(i);
        let tap = self.taps.swap_remove(i);
        let _ = self.to_writer.send(ToWriter::Ended {
            id: tap.id,
            superseded,
        });
    }

    fn start(&mut self, h: listen::Handover) {
        self.expected.connected(h.pid);
        match Segment::open(&h.segment) {
            Ok(segment) => {
                // A new image of a pid we follow: the old one exec'd (the
                // new image may have ended already too, which ends the
                // pid's old image as well).
                if let Some(i) = self.taps.iter().position(|t| t.pid == h.pid) {
                    self.end(i, true);
                }
                let segment = Arc::new(segment);
                self.next_id += 1;
                let id = self.next_id;
                let _ = self.to_writer.send(ToWriter::Started {
                    id,
                    pid: h.pid,
                    segment: segment.clone(),
                });
                let options = &self.shared.options;
                self.taps
                    .push(Tap::new(id, h.pid, segment, h.pidfd, options));
            }
            Err(e) => lock(&self.shared.report)
                .notes
                .push(format!("pid {}: its data could not be read: {e}", h.pid)),
        }
    }
}

/// Children announced by their parents whose runtime has not connected
/// yet: the run is not over while one of them lives.
#[derive(Default)]
struct Expected {
    /// pid → pidfd, polled for the child's end.
    pending: HashMap<i32, OwnedFd>,
    /// Every pid that handed over a segment (a child may connect before
    /// its parent's announcement is read).
    connected: HashSet<i32>,
}

impl Expected {
    fn announce(&mut self, pid: i32) {
        if self.connected.contains(&pid) || self.pending.contains_key(&pid) {
            return;
        }
        // SAFETY: pidfd_open with a pid and no flags.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
        if fd >= 0 {
            // SAFETY: a descriptor the kernel just returned.
            self.pending
                .insert(pid, unsafe { OwnedFd::from_raw_fd(fd) });
        }
    }

    fn connected(&mut self, pid: i32) {
        self.connected.insert(pid);
        self.pending.remove(&pid);
    }
}

/// The collector thread: starts the writer thread, follows images until
/// the run is over, then lets the writer finish.
fn run(listener: &listen::Listener, shared: &Shared) {
    let (to_writer, from_taps) = mpsc::channel();
    std::thread::scope(|scope| {
        let writer = std::thread::Builder::new()
            .name("strobe-writer".into())
            .spawn_scoped(scope, || write(shared, from_taps));
        if let Err(e) = writer {
            lock(&shared.report)
                .notes
                .push(format!("the collector could not start its writer: {e}"));
            return;
        }
        follow(
            listener,
            &mut Taps {
                shared,
                taps: Vec::new(),
                expected: Expected::default(),
                to_writer,
                next_id: 0,
                thread_events: Vec::new(),
            },
        );
    });
}

/// Follows every image of the run until it is over.
fn follow(listener: &listen::Listener, t: &mut Taps<'_>) {
    let shared = t.shared;
    let options = &shared.options;
    let mut kernel: Option<KernelEvents> = None;
    // When a burst last arrived: until BUSY_NS after, look again every
    // BUSY_POLL (producers may be refilling a ring right now).
    let mut last_records = 0u64;
    loop {
        let pending: Vec<i32> = t.expected.pending.keys().copied().collect();
        let mut fds: Vec<libc::pollfd> = [listener.raw_fd(), shared.wake.as_raw_fd()]
            .into_iter()
            .chain(t.taps.iter().map(Tap::pidfd))
            .chain(
                pending
                    .iter()
                    .map(|pid| t.expected.pending[pid].as_raw_fd()),
            )
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let busy = strobe_core::clock::now_ns().saturating_sub(last_records) < BUSY_NS;
        let timeout = if busy {
            BUSY_POLL
        } else {
            options.poll_interval
        };
        let timeout = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: a valid array of pollfds and timespec; no signal mask.
        unsafe {
            libc::ppoll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                &timeout,
                std::ptr::null(),
            )
        };
        // Read before accepting: a program that ended had connected before
        // it did, so its handover is accepted below.
        let program_done = shared.program_done.load(Ordering::SeqCst);
        if fds[1].revents != 0 {
            let mut count = [0u8; 8];
            // SAFETY: reading 8 bytes from our eventfd resets it.
            unsafe { libc::read(shared.wake.as_raw_fd(), count.as_mut_ptr().cast(), 8) };
        }
        let (tap_fds, pending_fds) = fds[2..].split_at(t.taps.len());
        for (tap, fd) in t.taps.iter_mut().zip(tap_fds) {
            if fd.revents != 0 {
                tap.exited = true;
            }
        }
        for (pid, fd) in pending.iter().zip(pending_fds) {
            if fd.revents != 0 {
                // Ended without connecting (or exec'd an image that was
                // named already).
                t.expected.pending.remove(pid);
            }
        }
        for h in listener.accept_all() {
            t.start(h);
        }
        // Past the limit, the rings wait (and lossless producers with them)
        // until the writer catches up; ending images are still emptied.
        let room = shared.queued.load(Ordering::SeqCst) < QUEUE_LIMIT;
        if kernel.is_none() {
            kernel = lock(&shared.kernel).take();
        }
        if let Some(events) = kernel.as_mut().filter(|_| room) {
            t.drain_kernel(events);
        }
        if room {
            t.drain_thread_events();
        }
        for i in 0..t.taps.len() {
            t.taps[i].control(options);
            if room && t.drain(i) > BURST_BYTES {
                last_records = strobe_core::clock::now_ns();
            }
        }
        let interrupted = shared.interrupted.load(Ordering::SeqCst);
        let mut i = 0;
        while i < t.taps.len() {
            if t.taps[i].exited || interrupted {
                // The pid may be reused by a later child of the run.
                let pid = t.taps[i].pid;
                t.expected.connected.remove(&pid);
                t.end(i, false);
            } else {
                i += 1;
            }
        }
        *lock(&shared.live) = t
            .taps
            .iter()
            .map(|tap| (tap.pid, Some(tap.command.clone())))
            .chain(t.expected.pending.keys().map(|&pid| (pid, None)))
            .collect();
        if interrupted || (program_done && t.taps.is_empty() && t.expected.pending.is_empty()) {
            if let Some(events) = kernel.as_mut() {
                t.drain_kernel(events);
            }
            t.drain_thread_events();
            return;
        }
    }
}

/// A process's name from `/proc`, for messages about a child that has not
/// connected.
fn comm(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|c| c.trim_end().to_string())
        .unwrap_or_else(|_| "starting".into())
}
