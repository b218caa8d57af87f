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
use std::collections::{HashMap, HashSet};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
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
    /// Processes followed now: (pid, command; `None` for a child that has
    /// not connected yet).
    live: Mutex<Vec<(i32, Option<String>)>>,
    /// An eventfd that wakes the collector thread's `poll`.
    wake: OwnedFd,
    /// Set (and notified) when the collector thread returns.
    done: (Mutex<bool>, Condvar),
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

/// Finishes `p` and adds its results to the report; children it
/// announced last are expected.
fn retire(shared: &Shared, mut p: Process, superseded: bool, expected: &mut Expected) {
    p.drain(&shared.options);
    for child in p.take_children() {
        expected.announce(child);
    }
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

/// The collector thread.
fn run(listener: &listen::Listener, shared: &Shared) {
    let options = &shared.options;
    let mut processes: Vec<Process> = Vec::new();
    let mut expected = Expected::default();
    loop {
        let pending: Vec<i32> = expected.pending.keys().copied().collect();
        let mut fds: Vec<libc::pollfd> = [listener.raw_fd(), shared.wake.as_raw_fd()]
            .into_iter()
            .chain(processes.iter().map(Process::pidfd))
            .chain(pending.iter().map(|pid| expected.pending[pid].as_raw_fd()))
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
        // Read before accepting: a program that ended had connected before
        // it did, so its handover is accepted below.
        let program_done = shared.program_done.load(Ordering::SeqCst);
        if fds[1].revents != 0 {
            let mut count = [0u8; 8];
            // SAFETY: reading 8 bytes from our eventfd resets it.
            unsafe { libc::read(shared.wake.as_raw_fd(), count.as_mut_ptr().cast(), 8) };
        }
        let (process_fds, pending_fds) = fds[2..].split_at(processes.len());
        for (p, fd) in processes.iter_mut().zip(process_fds) {
            if fd.revents != 0 {
                p.exited = true;
            }
        }
        for (pid, fd) in pending.iter().zip(pending_fds) {
            if fd.revents != 0 {
                // Ended without connecting (or exec'd an image that was
                // named already).
                expected.pending.remove(pid);
            }
        }
        for h in listener.accept_all() {
            expected.connected(h.pid);
            match Segment::open(&h.segment) {
                Ok(segment) => {
                    // A new image of a pid we follow: the old one exec'd
                    // (the new image may have ended already too, which
                    // ends the pid's old image as well).
                    if let Some(i) = processes.iter().position(|p| p.pid == h.pid) {
                        let old = processes.swap_remove(i);
                        retire(shared, old, true, &mut expected);
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
            for child in p.take_children() {
                expected.announce(child);
            }
        }
        let interrupted = shared.interrupted.load(Ordering::SeqCst);
        let (ended, running): (Vec<_>, Vec<_>) =
            processes.into_iter().partition(|p| p.exited || interrupted);
        processes = running;
        for p in ended {
            retire(shared, p, false, &mut expected);
        }
        *lock(&shared.live) = processes
            .iter()
            .map(|p| (p.pid, Some(p.command())))
            .chain(expected.pending.keys().map(|&pid| (pid, None)))
            .collect();
        if interrupted || (program_done && processes.is_empty() && expected.pending.is_empty()) {
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
