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
mod tests {
    use super::*;
    use crate::listen::{Peer, UNKNOWN_GRACE_NS};

    /// A descriptor standing for a child's pidfd.
    fn pidfd() -> std::io::Result<OwnedFd> {
        Ok(std::fs::File::open("/dev/null")?.into())
    }

    fn gone(_: i32) -> std::io::Result<OwnedFd> {
        Err(std::io::Error::from_raw_os_error(libc::ESRCH))
    }

    #[test]
    fn an_announced_child_is_expected_until_it_connects_or_ends() {
        let mut e = Expected::default();
        e.announce_with(10, |_| pidfd(), || 0);
        e.announce_with(11, |_| pidfd(), || 0);
        assert_eq!(e.pending.len(), 2);
        // Announced twice (fork, then the child's exec): expected once,
        // its descriptor not opened again.
        e.announce_with(10, |_| panic!("opened twice"), || 0);
        assert_eq!(e.pending.len(), 2);
        e.connected(10);
        assert!(!e.pending.contains_key(&10));
        // A child that connected before its parent's announcement was
        // read is not expected again.
        e.announce_with(10, |_| panic!("already connected"), || 0);
        assert!(!e.pending.contains_key(&10));
        e.child_ended_at(11, 5_000);
        assert!(e.pending.is_empty());
        assert_eq!(e.ended.get(&11), Some(&5_000));
    }

    #[test]
    fn a_child_gone_before_its_announcement_was_read_is_remembered_as_ended() {
        let mut e = Expected::default();
        e.announce_with(12, gone, || 7_000);
        assert!(e.pending.is_empty());
        assert_eq!(e.ended.get(&12), Some(&7_000));
    }

    #[test]
    fn ended_processes_are_forgotten_after_twice_the_listeners_grace() {
        let mut e = Expected::default();
        e.child_ended_at(1, 1_000);
        e.child_ended_at(2, 1_000 + UNKNOWN_GRACE_NS);
        e.forget_ended(1_000 + 2 * UNKNOWN_GRACE_NS);
        assert!(e.ended.contains_key(&1), "kept up to the bound itself");
        e.forget_ended(1_001 + 2 * UNKNOWN_GRACE_NS);
        assert!(!e.ended.contains_key(&1));
        assert!(e.ended.contains_key(&2));
        // A clock that seems to go back keeps them.
        e.forget_ended(0);
        assert!(e.ended.contains_key(&2));
        e.forget_ended(u64::MAX);
        assert!(e.ended.is_empty());
    }

    /// Parents as `/proc` would show them: 1 ← 50 (the launcher, the
    /// run's root) ← 60 ← 70; 80 and 90 are children of 1; 95 of 90.
    fn parent_of(pid: i32) -> Option<i32> {
        match pid {
            50 | 80 | 90 => Some(1),
            60 => Some(50),
            70 => Some(60),
            95 => Some(90),
            _ => None,
        }
    }

    const ME: u32 = 1000;

    fn peer(pid: i32, uid: u32) -> Peer {
        Peer { pid, uid }
    }

    #[test]
    fn the_run_is_its_root_and_the_roots_descendants_whoever_their_user() {
        let e = Expected::default();
        let none = |_| false;
        for pid in [50, 60, 70] {
            assert!(e.admits(peer(pid, ME), ME, 50, none, parent_of), "{pid}");
            // `runuser -u postgres -- postgres` under a root launcher.
            assert!(e.admits(peer(pid, 70), ME, 50, none, parent_of), "{pid}");
        }
        for pid in [1, 80, 95, 12345] {
            assert!(!e.admits(peer(pid, ME), ME, 50, none, parent_of), "{pid}");
        }
    }

    #[test]
    fn followed_images_and_expected_children_bring_their_descendants_in() {
        let mut e = Expected::default();
        // 80 outlived its parent of the run (now a child of 1), announced.
        e.announce_with(80, |_| pidfd(), || 0);
        assert!(e.admits(peer(80, 7), ME, 50, |_| false, parent_of));
        // 90 is followed (it connected); 95 is its child.
        let followed = |p| p == 90;
        assert!(e.admits(peer(95, 7), ME, 50, followed, parent_of));
        assert!(!e.admits(peer(95, 7), ME, 50, |_| false, parent_of));
    }

    #[test]
    fn a_process_of_the_run_seen_ended_is_let_in_only_as_the_collectors_user() {
        let mut e = Expected::default();
        // Ended, and gone from /proc: nothing shows whose child it was.
        e.child_ended_at(4242, 0);
        assert!(e.admits(peer(4242, ME), ME, 50, |_| false, parent_of));
        assert!(!e.admits(peer(4242, ME + 1), ME, 50, |_| false, parent_of));
        assert!(!e.admits(peer(4243, ME), ME, 50, |_| false, parent_of));
        e.forget_ended(u64::MAX);
        assert!(!e.admits(peer(4242, ME), ME, 50, |_| false, parent_of));
    }

    #[test]
    fn the_run_ends_when_the_program_ended_and_nothing_of_it_is_left() {
        assert!(run_over(false, true, 0, 0, true));
        assert!(!run_over(false, false, 0, 0, true), "the program runs");
        assert!(!run_over(false, true, 1, 0, true), "an image is followed");
        assert!(!run_over(false, true, 0, 1, true), "a child is expected");
        assert!(!run_over(false, true, 0, 0, false), "a connection waits");
        assert!(run_over(true, false, 3, 2, false), "interrupted");
    }

    #[test]
    fn ids_are_listed_with_a_mark_when_some_are_not_named() {
        assert_eq!(listed(&[12, 13, 14], 3), "12, 13, 14");
        assert_eq!(listed(&[12, 13], 47), "12, 13, …");
        assert_eq!(listed(&[], 0), "");
        assert_eq!(count_of(1, "process", "processes"), "1 process");
        assert_eq!(count_of(0, "process", "processes"), "0 processes");
        assert_eq!(count_of(47, "thread", "threads"), "47 threads");
    }

    #[test]
    fn processes_without_the_runtime_are_grouped_by_image_with_a_few_named() {
        let mut groups = BTreeMap::new();
        for pid in 1..=7 {
            unprofiled_group(
                &mut groups,
                pid,
                exec_reason::STATIC,
                b"/bin/busybox".to_vec(),
            )
            .refused += 1;
        }
        unprofiled_group(
            &mut groups,
            8,
            exec_reason::SETUID,
            b"/bin/busybox".to_vec(),
        )
        .sampled += 1;
        assert_eq!(groups.len(), 2, "one group per image and reason");
        let busybox = &groups[&(b"/bin/busybox".to_vec(), exec_reason::STATIC)];
        assert_eq!(busybox.pids, [1, 2, 3, 4, 5]);
        assert_eq!(busybox.refused, 7);
        // Past the images named, new ones share one group; known ones
        // keep theirs.
        for i in groups.len()..IMAGES_NAMED {
            unprofiled_group(
                &mut groups,
                100,
                exec_reason::STATIC,
                format!("/x/{i}").into(),
            );
        }
        assert_eq!(groups.len(), IMAGES_NAMED);
        unprofiled_group(&mut groups, 200, exec_reason::STATIC, b"/y/new".to_vec());
        unprofiled_group(&mut groups, 201, exec_reason::STATIC, b"/y/newer".to_vec());
        unprofiled_group(
            &mut groups,
            9,
            exec_reason::STATIC,
            b"/bin/busybox".to_vec(),
        );
        assert_eq!(groups.len(), IMAGES_NAMED + 1);
        let others = &groups[&(b"other images".to_vec(), exec_reason::STATIC)];
        assert_eq!(others.pids, [200, 201]);
        assert!(!groups.contains_key(&(b"/y/new".to_vec(), exec_reason::STATIC)));
    }

    #[test]
    fn a_group_of_processes_without_the_runtime_is_one_line() {
        let group = Unprofiled {
            pids: vec![10, 11],
            sampled: 1,
            gone: 1,
            ..Unprofiled::default()
        };
        assert_eq!(
            group.note(b"/bin/static", exec_reason::STATIC),
            "2 processes of /bin/static (pids 10, 11) ran a static image (nothing can be \
             preloaded into it): 1 process sampled by the kernel from when the collector saw \
             it start (no regions, markers or tracing); 1 process ended before the collector \
             could sample it"
        );
        let group = Unprofiled {
            pids: vec![1, 2, 3, 4, 5],
            refused: 7,
            why_refused: Some("kernel sampling is off".into()),
            ..Unprofiled::default()
        };
        assert_eq!(
            group.note(b"env", exec_reason::ENVIRONMENT),
            "7 processes of env (pids 1, 2, 3, 4, 5, …) started with a cleared environment \
             (strobe's runtime was not passed on): 7 processes not profiled (kernel sampling \
             is off)"
        );
        let group = Unprofiled {
            pids: vec![3],
            sampled: 2,
            ..Unprofiled::default()
        };
        assert!(group
            .note(b"x", exec_reason::SETUID)
            .contains("2 processes sampled by the kernel from when the collector saw each start"));
    }

    /// The collector's shared state for a run writing into `dir` (or
    /// into nothing, when its run directory cannot be made).
    fn shared(run_dir: Option<&std::path::Path>) -> Shared {
        let mut options = crate::fuzz::options_for(&std::env::temp_dir());
        let dir = run_dir.map(std::path::Path::to_path_buf);
        options.run_dir = Arc::new(crate::RunDir::new(move || {
            dir.clone()
                .ok_or_else(|| std::io::Error::from_raw_os_error(libc::EROFS))
        }));
        Shared {
            options,
            report: Default::default(),
            program_done: Default::default(),
            interrupted: Default::default(),
            live: Default::default(),
            wake: std::fs::File::open("/dev/null").unwrap().into(),
            done: Default::default(),
            queued: Default::default(),
            spooled: Default::default(),
            kernel: Default::default(),
            kernel_for_all: Default::default(),
            announced: Default::default(),
        }
    }

    fn taps(shared: &Shared) -> (Taps<'_>, mpsc::Receiver<ToWriter>) {
        let (to_writer, from_taps) = mpsc::channel();
        let taps = Taps::new(shared, to_writer);
        (taps, from_taps)
    }

    /// A batch of `n` records of 16 bytes each.
    fn batch(n: usize) -> Batch {
        let mut b = Batch::default();
        for k in 0..n {
            let start = b.bytes.len();
            b.bytes.extend_from_slice(&[k as u8; 16]);
            b.records
                .push((crate::source::Source::Events, 7, start..b.bytes.len()));
        }
        b
    }

    /// The batch of the next message to the writer.
    fn sent(from: &mpsc::Receiver<ToWriter>) -> Batch {
        match from.try_recv() {
            Ok(ToWriter::Records { batch, .. }) => batch,
            _ => panic!("no records sent"),
        }
    }

    #[test]
    fn batches_wait_in_memory_until_the_backlog_passes_its_bound() {
        let dir = tempfile::tempdir().unwrap();
        let shared = shared(Some(dir.path()));
        let (mut t, from) = taps(&shared);
        let b = batch(3);
        let weight = b.weight();
        assert_eq!(
            t.send(b, |batch| ToWriter::Records { id: 1, batch }),
            weight
        );
        assert_eq!(shared.queued.load(Ordering::SeqCst), weight);
        assert_eq!(shared.spooled.load(Ordering::SeqCst), 0);
        assert!(t.spool.is_none(), "no spool file until one is needed");
        let got = sent(&from);
        assert!(got.spilled.is_none());
        assert_eq!(got.records.len(), 3);
    }

    #[test]
    fn past_the_bound_a_batchs_records_wait_on_disk_and_the_counts_balance() {
        let dir = tempfile::tempdir().unwrap();
        let shared = shared(Some(dir.path()));
        let (mut t, from) = taps(&shared);
        shared.queued.store(SPILL_ABOVE - 10, Ordering::SeqCst);
        let mut b = batch(4);
        b.notes.push("stays in memory".into());
        let weight = b.weight();
        let original = batch(4);
        assert_eq!(
            t.send(b, |batch| ToWriter::Records { id: 1, batch }),
            weight
        );
        let mut got = sent(&from);
        assert!(got.records.is_empty() && got.bytes.is_empty());
        assert_eq!(got.notes, ["stays in memory"]);
        let spilled = got.spilled.as_ref().expect("on disk");
        // What the writer takes off the counts when it reads the batch
        // back is what the collector added.
        assert_eq!(shared.spooled.load(Ordering::SeqCst), spilled.len() as u64);
        assert_eq!(shared.queued.load(Ordering::SeqCst), SPILL_ABOVE - 10);
        got.unspill().unwrap();
        assert_eq!(got.bytes, original.bytes);
        assert_eq!(got.records, original.records);
        // The spool file is unnamed: nothing left in the run directory.
        assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
    }

    #[test]
    fn without_a_run_directory_the_spool_goes_to_the_temporary_directory() {
        let shared = shared(None);
        let (mut t, from) = taps(&shared);
        shared.queued.store(SPILL_ABOVE, Ordering::SeqCst);
        t.send(batch(2), |batch| ToWriter::Records { id: 1, batch });
        assert!(sent(&from).spilled.is_some());
        assert!(matches!(t.spool, Some(Ok(_))));
        assert!(crate::lock(&shared.report).notes.is_empty());
    }

    #[test]
    fn threads_handed_to_the_kernel_are_one_line_per_reason_and_outcome() {
        let mut noted: BTreeMap<(&'static str, String), Vec<i32>> = BTreeMap::new();
        noted.insert(
            ("blocked the sampling signal", "not sampled".into()),
            vec![7],
        );
        noted.insert(
            ("had no sampler", "sampled by the kernel".into()),
            (20..28).collect(),
        );
        assert_eq!(
            threads_noted(&noted),
            [
                "thread 7 blocked the sampling signal: not sampled".to_string(),
                "8 threads (20, 21, 22, 23, 24, …) had no sampler: sampled by the kernel"
                    .to_string()
            ]
        );
        assert!(threads_noted(&BTreeMap::new()).is_empty());
    }
}
