//! `strobe-collect`: the collector. The profiled program only produces;
//! the collector, in its own process (the `strobe sample` launcher), does
//! everything else.
//!
//! Each runtime hands over its process's shared segment and a pidfd
//! ([`listen`]). The collector thread drains every process's rings every
//! few milliseconds (and sooner when a producer rings the doorbell), writes
//! each process's database ([`profile`]) in the run directory, sets the
//! samplers' on/off flags from delays, durations and time windows, and
//! finishes a process when its pidfd says it ended or when its pid shows
//! up with a new segment after `exec`. What could not be profiled is
//! reported, never silent.
//!
//! Owns the collector thread and the run's report. Never runs inside the
//! profiled program.

mod listen;
mod process;
mod profile;
mod trace_types;

use process::Process;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use strobe_core::shm::segment::Segment;
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
    /// Where databases go (`<run_dir>/<db name from the runtime>`).
    pub run_dir: PathBuf,
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
    /// Processes followed now: (pid, command).
    live: Mutex<Vec<(i32, String)>>,
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
        let shared = Arc::new(Shared {
            options,
            report: Mutex::new(Report::default()),
            program_done: AtomicBool::new(false),
            interrupted: AtomicBool::new(false),
            live: Mutex::new(Vec::new()),
        });
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("strobe-collector".into())
                .spawn(move || run(&listener, &shared))?
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
        self.shared
            .live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The launched program ended: finish once every process it started
    /// has ended too.
    pub fn program_done(&self) {
        self.shared.program_done.store(true, Ordering::SeqCst);
    }

    /// Stop following running processes (their databases are finished
    /// with what was collected).
    pub fn interrupt(&self) {
        self.shared.interrupted.store(true, Ordering::SeqCst);
    }

    /// Whether the collector thread has finished.
    pub fn finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
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

/// Finishes `p` and adds its results to the report.
fn retire(shared: &Shared, p: Process, superseded: bool) {
    let (pid, command) = (p.pid, p.command());
    let (db, notes) = p.finish(&shared.options, superseded);
    let mut report = lock(&shared.report);
    if let Some(db) = db {
        report.databases.push(db);
    }
    for n in notes {
        report.notes.push(format!("pid {pid} ({command}): {n}"));
    }
}

/// The collector thread.
fn run(listener: &listen::Listener, shared: &Shared) {
    let options = &shared.options;
    let mut processes: Vec<Process> = Vec::new();
    let mut quiet_since: Option<std::time::Instant> = None;
    loop {
        let mut fds: Vec<libc::pollfd> = std::iter::once(listener.raw_fd())
            .chain(processes.iter().map(Process::pidfd))
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: a valid array of pollfds.
        unsafe {
            libc::poll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                options.poll_interval.as_millis().max(1) as i32,
            )
        };
        for (p, fd) in processes.iter_mut().zip(&fds[1..]) {
            if fd.revents != 0 {
                p.exited = true;
            }
        }
        for h in listener.accept_all() {
            match Segment::open(&h.segment) {
                Ok(segment) => {
                    // A new image of a pid we follow: the old one exec'd.
                    if let Some(i) = processes.iter().position(|p| p.pid == h.pid && !p.exited) {
                        let old = processes.swap_remove(i);
                        retire(shared, old, true);
                    }
                    processes.push(Process::new(h.pid, segment, h.pidfd, options));
                }
                Err(e) => lock(&shared.report)
                    .notes
                    .push(format!("pid {}: its data could not be read: {e}", h.pid)),
            }
        }
        for p in processes.iter_mut() {
            p.control(options);
            p.drain(options);
        }
        let interrupted = shared.interrupted.load(Ordering::SeqCst);
        let (ended, running): (Vec<_>, Vec<_>) =
            processes.into_iter().partition(|p| p.exited || interrupted);
        processes = running;
        for p in ended {
            retire(shared, p, false);
        }
        *lock(&shared.live) = processes.iter().map(|p| (p.pid, p.command())).collect();
        if interrupted {
            return;
        }
        if shared.program_done.load(Ordering::SeqCst) && processes.is_empty() {
            // A grace period for processes that were starting as the
            // program ended (their runtime has not connected yet).
            let since = *quiet_since.get_or_insert_with(std::time::Instant::now);
            if since.elapsed() >= Duration::from_millis(30) {
                return;
            }
        } else {
            quiet_since = None;
        }
    }
}
