//! `strobe-collect`: the collector. The profiled program only produces;
//! the collector, in its own process (the `strobe sample` launcher), does
//! everything else.
//!
//! Each runtime hands over its process's shared segment and a pidfd
//! ([`listen`]). Two threads share the work:
//! * the collector thread ([`follow`]) copies every process's rings into
//!   batches ([`tap`]): at once again while records keep arriving, every few
//!   milliseconds when all is quiet. It also sets the samplers' on/off
//!   flags from delays, durations and time windows, waits for children
//!   their parents announced, and ends a process image when its pidfd says
//!   it ended or when its pid shows up with a new segment after `exec`;
//! * the writer thread ([`writer`]) decodes the batches into each
//!   process's database ([`process`], [`profile`]) in the run directory;
//!   kernel samples are unwound there too ([`kernel`], [`kernel_writer`]).
//!
//! The producers therefore wait only for a copy, never for SQLite: past
//! [`SPILL_ABOVE`] bytes waiting in memory, copied records wait on disk
//! ([`spool`]), up to [`SPOOL_LIMIT`]; only when that is full or cannot be
//! written (or [`QUEUE_LIMIT`] bytes wait in memory) do the rings fill and
//! lossless producers wait. What could not be profiled is reported,
//! never silent.
//!
//! Owns the two threads and the run's report. Never runs inside the
//! profiled program.

mod ancestry;
mod batch;
pub mod causal;
mod described;
mod follow;
pub mod fuzz;
mod kernel;
mod kernel_writer;
mod listen;
mod mpi;
mod process;
mod procstat;
mod profile;
mod source;
mod spool;
mod tap;
mod trace_types;
mod writer;

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

pub use kernel::perf::{sees_system_calls as kernel_sees_system_calls, Events as KernelEvents};
pub use process::XPTI_NOTE;

/// Bytes of copied records that may wait for the writer in memory. Past
/// [`SPILL_ABOVE`] the collector moves new batches' records to disk, so
/// this is reached only when the spool cannot be written.
pub const QUEUE_LIMIT: usize = 96 << 20;

/// Bytes waiting in memory above which new batches' records go to the
/// spool file ([`spool`]).
pub const SPILL_ABOVE: usize = 32 << 20;

/// Bytes that may wait in the spool file.
pub const SPOOL_LIMIT: u64 = 64 << 30;
use strobe_core::timewindow::TimeWindows;

/// When one sampler's samples count, relative to each process's start.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timing {
    /// Nothing counts before this.
    pub delay_ns: u64,
    /// Nothing counts after delay + this (0 = until the end).
    pub duration_ns: u64,
    /// The sampling period (ns of the timer's clock): what one sample
    /// stands for.
    pub period_ns: u64,
}

/// What the collector needs to know.
#[derive(Debug, Clone)]
pub struct Options {
    /// The process the run descends from: only it, its descendants, and
    /// processes a member announced (a child that outlived its parent)
    /// may hand over a segment. The launcher itself for `strobe sample`;
    /// the program for a collector its runtime started.
    pub run_root: i32,
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
    /// The counters the runtime reads per thread (`sampling_events`), in
    /// the order records carry their values (the runtime's
    /// `RuntimeConfig::counters`). Empty: none.
    pub counters: Vec<ProfileCounter>,
    /// The derived-metric definitions each database keeps
    /// (`strobe_metric`), for metrics computed from the stored counters
    /// at read time.
    pub metrics: Vec<MetricDef>,
    /// How often per second each process's `/proc` values are read into
    /// counter series; 0 = never.
    pub process_sampling_hz: f64,
    /// User-API regions shorter than this (ns) are counted in
    /// `strobe_region_stats` but not stored (`trace_time_filter`); 0 =
    /// store all, keep no statistics.
    pub time_filter_ns: u64,
    /// Causal profiling of every process whose runtime takes part
    /// (`strobe causal`); `None`: none.
    pub causal: Option<causal::CausalOptions>,
}

/// Most counters the runtime reads per thread (each sample carries one
/// value per counter).
pub const MAX_COUNTERS: usize = strobe_wire::sample::MAX_SAMPLE_COUNTERS;

/// A counter the runtime reads on every thread.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileCounter {
    /// Its canonical name (the `rocpd_info_pmc` name).
    pub name: String,
    /// The unit of its values (`ns`, or empty for a count).
    pub unit: String,
    /// What it counts.
    pub description: String,
    /// Where it comes from (`software`, `hardware`, `rusage`, ...).
    pub component: String,
    /// Multiply its raw values by this to get `unit`s (a PMU's scale; 1
    /// for most).
    pub scale: f64,
}

/// A derived-metric definition (see `strobe_db::MetricRow`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricDef {
    /// The name requests use.
    pub name: String,
    /// `metric` or `counter`.
    pub kind: String,
    /// A metric's expression; a counter's event spec.
    pub expression: String,
    /// The unit of its values.
    pub unit: Option<String>,
    /// What it measures.
    pub description: Option<String>,
    /// Asked for (else only referred to).
    pub requested: bool,
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
    /// Bytes of batches sent to the writer and not yet written, in memory.
    queued: AtomicUsize,
    /// Bytes of batches sent to the writer and waiting in the spool file.
    spooled: AtomicU64,
    /// Kernel sampling events to drain, once the launcher opened them.
    kernel: Mutex<Option<KernelEvents>>,
    /// The kernel samples every process of the run (the runtime's sampler
    /// is off): from the options, or set with the launcher's events.
    kernel_for_all: AtomicBool,
    /// Processes the launcher started, to be expected like children a
    /// parent announced.
    announced: Mutex<Vec<i32>>,
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
        let options_for_all = options.kernel_for_all;
        let mut listener = listen::Listener::bind()?;
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
            spooled: AtomicU64::new(0),
            kernel: Mutex::new(None),
            kernel_for_all: AtomicBool::new(options_for_all),
            announced: Mutex::new(Vec::new()),
        });
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("strobe-collector".into())
                .spawn(move || {
                    let _done = DoneOnDrop(&shared);
                    follow::run(&mut listener, &shared)
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
    /// `for_all`: they sample every process of the run (the runtime's own
    /// sampler is off), not only those nothing can be preloaded into.
    pub fn sample_kernel(&self, events: KernelEvents, for_all: bool) {
        self.shared.kernel_for_all.store(for_all, Ordering::SeqCst);
        *lock(&self.shared.kernel) = Some(events);
        self.shared.wake();
    }

    /// The launcher started process `pid` (the program): it is of the run
    /// even if it ends before the collector sees it connect.
    pub fn announce(&self, pid: i32) {
        lock(&self.shared.announced).push(pid);
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

/// A process's name from `/proc`, for messages about a child that has not
/// connected.
fn comm(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|c| c.trim_end().to_string())
        .unwrap_or_else(|_| "starting".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    #[test]
    fn the_run_directory_is_made_once_on_first_use() {
        let made = Arc::new(AtomicU32::new(0));
        let counter = made.clone();
        let dir = RunDir::new(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok(PathBuf::from("/runs/prog-1"))
        });
        assert_eq!(
            dir.created(),
            None,
            "a run that records nothing leaves none"
        );
        assert_eq!(made.load(Ordering::SeqCst), 0);
        assert_eq!(dir.path(), Ok(Path::new("/runs/prog-1")));
        assert_eq!(dir.path(), Ok(Path::new("/runs/prog-1")));
        assert_eq!(made.load(Ordering::SeqCst), 1);
        assert_eq!(dir.created(), Some(PathBuf::from("/runs/prog-1")));
    }

    #[test]
    fn a_run_directory_that_cannot_be_made_is_not_tried_again() {
        let tries = Arc::new(AtomicU32::new(0));
        let counter = tries.clone();
        let dir = RunDir::new(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            Err(std::io::Error::from_raw_os_error(libc::EACCES))
        });
        let first = dir.path().unwrap_err();
        assert!(first.contains("Permission denied"), "{first}");
        assert_eq!(dir.path().unwrap_err(), first);
        assert_eq!(tries.load(Ordering::SeqCst), 1);
        assert_eq!(dir.created(), None);
    }
}
