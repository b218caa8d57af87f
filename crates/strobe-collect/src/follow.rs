//! The collector thread: follows every process image of the run until
//! the run is over.
//!
//! Owns accepting runtimes' handovers (from processes of the run only:
//! [`Taps::is_member`]), the images followed ([`Tap`]s), the
//! children announced but not yet connected, the kernel's sampling rings,
//! polling (every 5 ms, every 100 µs for 20 ms after a burst) and the end of
//! the run. Never writes a database: it sends copies to the writer thread.

use crate::batch::Batch;
use crate::spool::Spool;
use crate::tap::{Found, Tap, WithoutRuntime};
use crate::writer::{write, ToWriter};
use crate::{ancestry, listen, lock, KernelEvents, Shared, QUEUE_LIMIT, SPILL_ABOVE, SPOOL_LIMIT};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::Duration;
use strobe_wire::segment::{exec_reason, Segment};

/// How long after a burst of records (more than [`BURST_BYTES`] in one
/// pass) the collector keeps looking at [`BUSY_POLL`] intervals rather
/// than the idle poll interval. Sampling alone never makes a burst.
const BUSY_NS: u64 = 20_000_000;
const BUSY_POLL: Duration = Duration::from_micros(100);
const BURST_BYTES: usize = 16 << 10;

/// Whether thread `tid` of process `pid` still exists.
fn thread_alive(pid: i32, tid: i32) -> bool {
    // SAFETY: tgkill with signal 0 only checks that the thread exists.
    unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, 0) == 0 }
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
    /// reach: (pid, tid, events).
    thread_events: Vec<(i32, i32, KernelEvents)>,
    /// The run's kernel events (inherited by everything the program
    /// starts) are open: a thread or process to hand to the kernel is
    /// sampled by them already.
    inherited_events: bool,
    /// Processes that ran an image without the runtime, by image and
    /// reason: said once per group when the run ends.
    without_runtime: BTreeMap<(Vec<u8>, u32), Unprofiled>,
    /// The spool file, once made; `Err` once it could not be made or
    /// written (said once; records then wait in memory).
    spool: Option<Result<Spool, ()>>,
}

/// What became of the processes of one image that ran without the
/// runtime.
#[derive(Default)]
struct Unprofiled {
    /// The first [`PIDS_NAMED`] of them.
    pids: Vec<i32>,
    /// Sampled by the kernel from when the collector saw them.
    sampled: u64,
    /// Ended before the collector could hand them to the kernel.
    gone: u64,
    /// Not sampled: the kernel refused (the first reason), or kernel
    /// sampling is off.
    refused: u64,
    why_refused: Option<String>,
}

impl Unprofiled {
    /// The run summary's line for `count` processes of `image`.
    fn note(&self, image: &[u8], reason: u32) -> String {
        let total = self.sampled + self.gone + self.refused;
        let mut outcome = Vec::new();
        if self.sampled > 0 {
            outcome.push(format!(
                "{} sampled by the kernel from when the collector saw {} start (no regions, \
                 markers or tracing)",
                count_of(self.sampled, "process", "processes"),
                if self.sampled == 1 { "it" } else { "each" }
            ));
        }
        if self.gone > 0 {
            outcome.push(format!(
                "{} ended before the collector could sample {}",
                count_of(self.gone, "process", "processes"),
                if self.gone == 1 { "it" } else { "them" }
            ));
        }
        if self.refused > 0 {
            outcome.push(format!(
                "{} not profiled{}",
                count_of(self.refused, "process", "processes"),
                self.why_refused
                    .as_deref()
                    .map_or(String::new(), |e| format!(" ({e})"))
            ));
        }
        format!(
            "{} of {} ({} {}) {}: {}",
            count_of(total, "process", "processes"),
            String::from_utf8_lossy(image),
            if total == 1 { "pid" } else { "pids" },
            listed(&self.pids, total),
            exec_reason::describe(reason),
            outcome.join("; ")
        )
    }
}

/// The lines for the threads of an image handed to the kernel
/// ([`Tap::threads_noted`]), one per reason and outcome.
fn threads_noted(noted: &BTreeMap<(&'static str, String), Vec<i32>>) -> Vec<String> {
    noted
        .iter()
        .map(|((why, outcome), tids)| match tids[..] {
            [tid] => format!("thread {tid} {why}: {outcome}"),
            _ => format!(
                "{} threads ({}) {why}: {outcome}",
                tids.len(),
                listed(&tids[..tids.len().min(PIDS_NAMED)], tids.len() as u64)
            ),
        })
        .collect()
}

/// Processes (threads) named by pid (tid) in a group's line.
const PIDS_NAMED: usize = 5;

/// Groups of processes without the runtime named by their image; the
/// images come from the program's records, so past these, one group for
/// all others.
const IMAGES_NAMED: usize = 64;

/// The group of processes without the runtime that process `pid`, which
/// runs `image` for `reason`, is counted in (made on first use; past
/// [`IMAGES_NAMED`] images, new ones share one group), with its pid named
/// while the group names fewer than [`PIDS_NAMED`].
fn unprofiled_group(
    groups: &mut BTreeMap<(Vec<u8>, u32), Unprofiled>,
    pid: i32,
    reason: u32,
    mut image: Vec<u8>,
) -> &mut Unprofiled {
    if groups.len() >= IMAGES_NAMED && !groups.contains_key(&(image.clone(), reason)) {
        image = b"other images".to_vec();
    }
    let group = groups.entry((image, reason)).or_default();
    if group.pids.len() < PIDS_NAMED {
        group.pids.push(pid);
    }
    group
}

/// "12, 13, 14" of `total` ids, with "…" when some are not named.
fn listed(named: &[i32], total: u64) -> String {
    let ids: Vec<String> = named.iter().map(i32::to_string).collect();
    let more = if total > named.len() as u64 {
        ", …"
    } else {
        ""
    };
    format!("{}{more}", ids.join(", "))
}

/// "1 process", "47 processes".
fn count_of(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

impl<'a> Taps<'a> {
    /// No process followed yet; batches go to the writer on `to_writer`.
    fn new(shared: &'a Shared, to_writer: mpsc::Sender<ToWriter>) -> Taps<'a> {
        Taps {
            shared,
            taps: Vec::new(),
            expected: Expected::default(),
            to_writer,
            next_id: 0,
            thread_events: Vec::new(),
            inherited_events: false,
            without_runtime: BTreeMap::new(),
            spool: None,
        }
    }

    /// Copies `tap`'s rings and sends what they held; returns the bytes
    /// copied.
    fn drain(&mut self, i: usize) -> usize {
        let mut batch = Batch::default();
        let mut found = Found::default();
        self.taps[i].drain(&mut batch, &mut found);
        if self.taps[i].replaced_by_image_without_runtime() {
            // The kernel samples the whole process now: its threads
            // (which no slot knows) must not be handed over again.
            found.blocking.clear();
        } else if self.shared.options.kernel_threads.is_some() {
            self.taps[i].threads_without_slot(&mut found.unslotted);
        }
        for child in found.children {
            self.expected.announce(child);
        }
        for process in found.without_runtime {
            self.sample_without_runtime(process);
        }
        let pid = self.taps[i].pid;
        let causal = self.taps[i].causal_active();
        let blocked = if causal {
            "blocked the sampling signal (causal profiling can neither count its samples nor \
             pause it: what depends on it is not measured)"
        } else {
            "blocked the sampling signal"
        };
        let unslotted = "had no sampler (not started through strobe's pthread_create wrapper: \
                         made by a library that calls libc's directly, as jemalloc does, or by a \
                         raw clone)";
        let threads = found
            .blocking
            .into_iter()
            .map(|tid| (tid, blocked))
            .chain(found.unslotted.into_iter().map(|tid| (tid, unslotted)));
        for (tid, why) in threads {
            if let Some(outcome) = self.sample_thread_by_kernel(pid, tid) {
                let tids = self.taps[i]
                    .threads_noted
                    .entry((why, outcome))
                    .or_default();
                tids.push(tid);
            }
        }
        if batch.is_empty() {
            return 0;
        }
        let id = self.taps[i].id;
        self.send(batch, |batch| ToWriter::Records { id, batch })
    }

    /// Sends `batch` to the writer; when the writer's backlog in memory is
    /// past [`SPILL_ABOVE`], its records go to the spool file first.
    /// Returns the bytes the batch holds in memory and on disk.
    fn send(&mut self, mut batch: Batch, message: impl FnOnce(Batch) -> ToWriter) -> usize {
        let weight = batch.weight();
        if self.shared.queued.load(Ordering::SeqCst) + weight > SPILL_ABOVE {
            if let Some(spool) = self.spool() {
                match batch.spill(spool) {
                    Ok(bytes) => {
                        self.shared
                            .spooled
                            .fetch_add(bytes as u64, Ordering::SeqCst);
                    }
                    Err(e) => self.spool_failed(&e),
                }
            }
        }
        let in_memory = batch.weight();
        self.shared.queued.fetch_add(in_memory, Ordering::SeqCst);
        let _ = self.to_writer.send(message(batch));
        weight
    }

    /// The spool file, made on first use in the run directory (or, where
    /// its file system has no unnamed files, the temporary directory).
    fn spool(&mut self) -> Option<&mut Spool> {
        if self.spool.is_none() {
            let made = self
                .shared
                .options
                .run_dir
                .path()
                .map_err(std::io::Error::other)
                .and_then(Spool::create)
                .or_else(|_| Spool::create(&std::env::temp_dir()));
            match made {
                Ok(spool) => self.spool = Some(Ok(spool)),
                Err(e) => {
                    self.spool_failed(&e);
                    return None;
                }
            }
        }
        self.spool.as_mut().and_then(|s| s.as_mut().ok())
    }

    /// Stops spooling after `e` (said once).
    fn spool_failed(&mut self, e: &std::io::Error) {
        self.spool = Some(Err(()));
        lock(&self.shared.report).notes.push(format!(
            "the collector could not keep its backlog on disk ({e}): it waits in memory, \
             up to {} MiB, and then the programs wait for the database writer",
            QUEUE_LIMIT >> 20
        ));
    }

    /// A thread of `pid` the in-program sampler cannot reach: the kernel
    /// samples it from now on, if it can. Returns what became of it for
    /// the run summary (none when the thread ended meanwhile).
    fn sample_thread_by_kernel(&mut self, pid: i32, tid: i32) -> Option<String> {
        let options = &self.shared.options;
        let not_sampled = "not sampled".to_string();
        let Some(kernel) = options.kernel_threads else {
            return Some(not_sampled);
        };
        let sampled = "sampled by the kernel from then on (not before)".to_string();
        if self.inherited_events {
            // The run's own kernel events (a static program started it)
            // already sample the thread: keep those samples.
            let _ = self.to_writer.send(ToWriter::KernelThread { pid, tid });
            return Some(sampled);
        }
        match KernelEvents::for_thread(tid, kernel.freq_hz, kernel.stack_bytes, 64) {
            Ok(events) => {
                self.thread_events.push((pid, tid, events));
                let _ = self.to_writer.send(ToWriter::KernelThread { pid, tid });
                Some(sampled)
            }
            Err(_) if !thread_alive(pid, tid) => None,
            Err(e) => Some(format!("{not_sampled}; kernel sampling of it failed: {e}")),
        }
    }

    /// A process runs (or is about to run) an image the runtime cannot
    /// start in: in `auto` mode the kernel samples all its threads (and
    /// what they start) from now on, if it can. Counted in its image's
    /// group for the run summary.
    fn sample_without_runtime(&mut self, process: WithoutRuntime) {
        let WithoutRuntime { pid, reason, image } = process;
        let kernel = self.shared.options.kernel_threads;
        let group = unprofiled_group(&mut self.without_runtime, pid, reason, image);
        let Some(kernel) = kernel else {
            group.refused += 1;
            group.why_refused = Some("kernel sampling is off: `--sampler auto` turns it on".into());
            return;
        };
        if ancestry::ended(pid) {
            group.gone += 1;
            return;
        }
        // Sampled: the run waits for it (a spawned child may outlive its
        // parent).
        if self.inherited_events {
            group.sampled += 1;
            self.expected.announce(pid);
            let _ = self.to_writer.send(ToWriter::KernelProcess { pid });
            return;
        }
        match KernelEvents::for_process(pid, kernel.freq_hz, kernel.stack_bytes, 64, false) {
            Ok(events) => {
                group.sampled += 1;
                self.expected.announce(pid);
                self.thread_events.push((pid, pid, events));
                let _ = self.to_writer.send(ToWriter::KernelProcess { pid });
            }
            Err(_) if ancestry::ended(pid) => group.gone += 1,
            Err(e) => {
                group.refused += 1;
                group
                    .why_refused
                    .get_or_insert_with(|| format!("kernel sampling failed: {e}"));
            }
        }
    }

    /// The run summary's lines for the processes that ran without the
    /// runtime, one per image and reason.
    fn unprofiled_notes(&self) -> Vec<String> {
        self.without_runtime
            .iter()
            .map(|((image, reason), group)| group.note(image, *reason))
            .collect()
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
        self.send(batch, |batch| ToWriter::Kernel { batch });
    }

    /// Copies the rings of the single-thread kernel events; closes those
    /// of threads that ended (after their last copy).
    fn drain_thread_events(&mut self) {
        let mut events = std::mem::take(&mut self.thread_events);
        events.retain_mut(|(pid, tid, e)| {
            let alive = thread_alive(*pid, *tid);
            self.drain_kernel(e);
            alive
        });
        self.thread_events = events;
    }

    /// Copies the rings a last time and ends image `i`.
    fn end(&mut self, i: usize) {
        self.drain(i);
        // Again: the first pass may have freed slots whose events came last.
        self.drain(i);
        let mut tap = self.taps.swap_remove(i);
        let mut last = Batch::default();
        tap.finish(&mut last);
        last.notes.extend(threads_noted(&tap.threads_noted));
        if !last.is_empty() {
            let _ = self.to_writer.send(ToWriter::Records {
                id: tap.id,
                batch: last,
            });
        }
        let _ = self.to_writer.send(ToWriter::Ended { id: tap.id });
    }

    /// Whether `peer` belongs to the run: the run's root, a process
    /// followed or announced, or a descendant of one of them; or, connected
    /// as this user, a process of the run seen ended lately (its ancestry
    /// can no longer be read).
    fn is_member(&self, peer: listen::Peer) -> bool {
        // SAFETY: geteuid has no preconditions.
        let own_uid = unsafe { libc::geteuid() };
        self.expected.admits(
            peer,
            own_uid,
            self.shared.options.run_root,
            |p| self.taps.iter().any(|t| t.pid == p && !t.exited),
            |p| ancestry::stat(p).map(|s| s.ppid),
        )
    }

    fn start(&mut self, h: listen::Handover) {
        self.expected.connected(h.pid);
        match Segment::open(&h.segment) {
            Ok(segment) => {
                // A new image of a pid we follow: the old one exec'd (the
                // new image may have ended already too, which ends the
                // pid's old image as well).
                if let Some(i) = self.taps.iter().position(|t| t.pid == h.pid) {
                    self.end(i);
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
    /// Processes of the run (announced or followed) seen ended, with when
    /// (ns): a short-lived child's connections may still be waiting (one
    /// per image it ran), and `/proc` no longer shows whose child it was.
    ended: HashMap<i32, u64>,
    /// Every pid that handed over a segment (a child may connect before
    /// its parent's announcement is read).
    connected: HashSet<i32>,
}

impl Expected {
    fn announce(&mut self, pid: i32) {
        self.announce_with(pid, strobe_core::pidfd::open, strobe_core::clock::now_ns);
    }

    /// [`Expected::announce`] with the pidfd `open` gives (an error: the
    /// process is gone) and the time `now` reads.
    fn announce_with(
        &mut self,
        pid: i32,
        open: impl FnOnce(i32) -> std::io::Result<OwnedFd>,
        now: impl FnOnce() -> u64,
    ) {
        if self.connected.contains(&pid) || self.pending.contains_key(&pid) {
            return;
        }
        match open(pid) {
            Ok(fd) => {
                self.pending.insert(pid, fd);
            }
            Err(_) => self.child_ended_at(pid, now()),
        }
    }

    /// Process `pid` of the run (announced, or followed) ended; it may
    /// still have connections waiting.
    fn child_ended(&mut self, pid: i32) {
        self.child_ended_at(pid, strobe_core::clock::now_ns());
    }

    /// [`Expected::child_ended`], seen at `now_ns`.
    fn child_ended_at(&mut self, pid: i32, now_ns: u64) {
        self.pending.remove(&pid);
        self.ended.insert(pid, now_ns);
    }

    /// Whether `peer` belongs to the run whose root is `root` (see
    /// [`Taps::is_member`]): it descends from the root, a child still
    /// expected or an image `followed` (by the parents `parent_of` gives);
    /// or it connected as `own_uid` (the collector's user) and is a
    /// process of the run seen ended lately.
    fn admits(
        &self,
        peer: listen::Peer,
        own_uid: u32,
        root: i32,
        followed: impl Fn(i32) -> bool,
        parent_of: impl Fn(i32) -> Option<i32>,
    ) -> bool {
        (peer.uid == own_uid && self.ended.contains_key(&peer.pid))
            || ancestry::descends_through(
                peer.pid,
                |p| p == root || self.pending.contains_key(&p) || followed(p),
                parent_of,
            )
    }

    /// Forgets the ended children whose connection could no longer be
    /// waiting (the listener decides on an unknown one within its grace).
    fn forget_ended(&mut self, now_ns: u64) {
        self.ended
            .retain(|_, &mut at| now_ns.saturating_sub(at) <= 2 * listen::UNKNOWN_GRACE_NS);
    }

    fn connected(&mut self, pid: i32) {
        self.connected.insert(pid);
        self.pending.remove(&pid);
    }
}

/// The collector thread: starts the writer thread, follows images until
/// the run is over, then lets the writer finish.
pub fn run(listener: &mut listen::Listener, shared: &Shared) {
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
        follow(listener, &mut Taps::new(shared, to_writer));
    });
}

/// Whether the run is over: the user interrupted it, or the launched
/// program ended and nothing of the run is left: no image followed, no
/// announced child still to connect, and no connection waiting to be
/// decided on (a child that connected and ended before its parent's
/// announcement was read is part of the run).
fn run_over(
    interrupted: bool,
    program_done: bool,
    images: usize,
    children_expected: usize,
    listener_idle: bool,
) -> bool {
    interrupted || (program_done && images == 0 && children_expected == 0 && listener_idle)
}

/// Follows every image of the run until it is over.
fn follow(listener: &mut listen::Listener, t: &mut Taps<'_>) {
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
                // named already); its connection may still be waiting.
                t.expected.child_ended(*pid);
            }
        }
        for pid in std::mem::take(&mut *lock(&shared.announced)) {
            t.expected.announce(pid);
        }
        let now = strobe_core::clock::now_ns();
        t.expected.forget_ended(now);
        let accepted = listener.accept(now, |peer| t.is_member(peer));
        lock(&shared.report).notes.extend(accepted.notes);
        for h in accepted.handovers {
            t.start(h);
        }
        // Past the limit, the rings wait (and lossless producers with them)
        // until the writer catches up; ending images are still emptied.
        let room = shared.queued.load(Ordering::SeqCst) < QUEUE_LIMIT
            && shared.spooled.load(Ordering::SeqCst) < SPOOL_LIMIT;
        if kernel.is_none() {
            kernel = lock(&shared.kernel).take();
            t.inherited_events = kernel.is_some();
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
                // The pid may be reused by a later child of the run. An
                // image it exec'd may have connected and ended since, with
                // no `/proc` entry left to show it is of the run.
                let pid = t.taps[i].pid;
                t.expected.connected.remove(&pid);
                t.expected.child_ended(pid);
                t.end(i);
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
        if run_over(
            interrupted,
            program_done,
            t.taps.len(),
            t.expected.pending.len(),
            listener.idle(),
        ) {
            if let Some(events) = kernel.as_mut() {
                t.drain_kernel(events);
            }
            t.drain_thread_events();
            let unprofiled = t.unprofiled_notes();
            lock(&shared.report).notes.extend(unprofiled);
            if listener.refused() > listen::NAMED_REFUSALS {
                lock(&shared.report).notes.push(format!(
                    "refused {} connections to the collector in all (the first {} are named above)",
                    listener.refused(),
                    listen::NAMED_REFUSALS
                ));
            }
            return;
        }
    }
}

#[cfg(test)]
mod tests;
