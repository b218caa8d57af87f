//! Counters in profiles (`sampling_events`): a group of per-thread
//! counters opened on every program thread at its start, read around
//! every region and, in the sampling signal handler, with every sample.
//!
//! Owns the process's counter list (resolved once, at start-up, outside
//! any handler), which of it can be counted here (decided by the first
//! thread; a counter that cannot be opened, a hardware event in a VM say,
//! is said once in a note to the collector and left out, never fatal),
//! each thread's open counters (a table by slot, so the handler finds
//! them with one atomic load), and their descriptors. The program carries
//! one perf descriptor per perf counter per thread (close-on-exec); when
//! it closes one (or reuses its number) the counters are not read again:
//! before each read the group leader's descriptor is asked for its kernel
//! id (`PERF_EVENT_IOC_ID`), and a descriptor that is no longer the
//! counter is not read, nor closed by strobe. Its values are then
//! missing. (Another thread of the program closing and reusing the
//! number between that check and the `read` right after it is not
//! excluded: a window of one system call.) A forked child closes the parent's descriptors it inherited
//! and opens its own.
//!
//! [`sample_values`] runs **inside the sampling signal handler**: it
//! allocates nothing, locks nothing, formats nothing, and calls only
//! `ioctl`, `read` and `getrusage`. It leaves the counters alone while
//! the interrupted thread reads them itself (the change then goes to the
//! thread's next sample). Nothing in this module runs, and no descriptor
//! is opened, when no counter was requested.

use std::cell::UnsafeCell;
use std::mem::ManuallyDrop;
use std::sync::atomic::{compiler_fence, AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::Mutex;
use strobe_metrics::catalog::{CounterKind, CounterSpec};
use strobe_metrics::counting::{CountError, Counters, OpenOptions, Reading, Target};
use strobe_wire::record::{CounterReading, COUNTER_MISSING, COUNTER_READING_BYTES};

/// `PERF_EVENT_IOC_ID`: `_IOR('$', 7, __u64 *)`.
const PERF_EVENT_IOC_ID: libc::c_ulong = 0x8008_2407;

/// The kernel id of the perf event behind `fd`, or `None` when `fd` is
/// not a perf event (closed, or reused by the program for something
/// else). One `ioctl`, async-signal-safe; `'$'` ioctls belong to perf, so
/// no other kind of descriptor acts on it.
fn perf_id(fd: i32) -> Option<u64> {
    let mut id = 0u64;
    // SAFETY: PERF_EVENT_IOC_ID writes one u64 through the pointer; on a
    // descriptor that is not a perf event the kernel refuses it.
    let rc = unsafe { libc::ioctl(fd, PERF_EVENT_IOC_ID as _, &mut id as *mut u64) };
    (rc == 0).then_some(id)
}

/// What a thread's counters hold, touched by the thread's own code and
/// by the handler on that thread, never both at once (see
/// [`ThreadCounters::busy`]).
struct State {
    /// Never dropped through `Counters::drop` unless every descriptor is
    /// still the counter's (see [`ThreadCounters::close`]).
    counters: ManuallyDrop<Counters>,
    /// Configured index of each opened counter.
    map: Box<[usize]>,
    /// One reading per opened counter, written by each read.
    scratch: Box<[Reading]>,
    /// The scaled total (see [`CounterReading::scaled_total`]) already
    /// handed out in the thread's samples, per configured counter
    /// ([`COUNTER_MISSING`] before the first reading). Samples carry the
    /// growth of this total, so their values add up to the counter's
    /// total: scaling each interval on its own would amplify the kernel's
    /// small disagreements between enabled and running time.
    last: Box<[u64]>,
}

/// One thread's open counters.
pub struct ThreadCounters {
    /// Set while the thread's own code reads; the handler then leaves
    /// the counters alone.
    busy: AtomicBool,
    /// A group leader's descriptor stopped being the counter: nothing is
    /// read any more.
    broken: AtomicBool,
    /// The group leaders' descriptors and kernel ids, checked before
    /// every read.
    leaders: Box<[(i32, u64)]>,
    /// Every descriptor with its kernel id.
    fds: Box<[(i32, u64)]>,
    state: UnsafeCell<State>,
    /// The readings a region record carries, per configured counter
    /// (thread code only; the handler never touches it).
    region: UnsafeCell<Box<[CounterReading]>>,
}

// SAFETY: `state` is used by the owning thread's code (with `busy` set)
// and by the signal handler on that same thread (only while `busy` is
// clear), never concurrently; `region` only by the owning thread's code
// (or the thread that opened the counters, before publishing them); the
// rest is immutable or atomic.
unsafe impl Sync for ThreadCounters {}
// SAFETY: as above.
unsafe impl Send for ThreadCounters {}

fn to_reading(r: &Reading) -> CounterReading {
    if r.raw == COUNTER_MISSING {
        CounterReading::MISSING
    } else {
        CounterReading {
            raw: r.raw,
            enabled_ns: r.enabled_ns,
            running_ns: r.running_ns,
        }
    }
}

impl ThreadCounters {
    /// Reads every counter into `st.scratch` (entries not read stay
    /// missing). False when nothing could be read. **Signal-handler
    /// safe**: `ioctl` per group leader, then one `read` per group (and
    /// `getrusage` for rusage counters); no allocation.
    fn read_fresh(&self, st: &mut State) -> bool {
        if self.broken.load(Ordering::Relaxed) {
            return false;
        }
        for &(fd, id) in self.leaders.iter() {
            if perf_id(fd) != Some(id) {
                self.broken.store(true, Ordering::Relaxed);
                return false;
            }
        }
        for r in st.scratch.iter_mut() {
            *r = Reading {
                raw: COUNTER_MISSING,
                enabled_ns: 0,
                running_ns: 0,
            };
        }
        st.counters.read_into(&mut st.scratch).is_ok()
    }

    /// Runs `f` with exclusive use of the state: thread code only; `busy`
    /// keeps the handler away meanwhile.
    fn with_state<R>(&self, f: impl FnOnce(&ThreadCounters, &mut State) -> R) -> R {
        self.busy.store(true, Ordering::SeqCst);
        compiler_fence(Ordering::SeqCst);
        // SAFETY: the handler leaves the state alone while `busy` is set,
        // and only this thread's code gets here.
        let r = f(self, unsafe { &mut *self.state.get() });
        compiler_fence(Ordering::SeqCst);
        self.busy.store(false, Ordering::SeqCst);
        r
    }

    /// Closes the descriptors that are still the counters'. When one is
    /// not (the program closed it or reused its number), it is left
    /// alone and the rest of the counters' memory is kept (leaked) rather
    /// than risk closing the program's descriptor.
    ///
    /// # Safety
    /// No handler or other code may use these counters any more.
    unsafe fn close(self: Box<Self>) {
        let all_ours = self.fds.iter().all(|&(fd, id)| perf_id(fd) == Some(id));
        if all_ours {
            let mut this = self;
            // SAFETY: nobody uses the counters any more (contract); every
            // descriptor is still theirs, so dropping closes only them.
            unsafe { ManuallyDrop::drop(&mut this.state.get_mut().counters) };
            return;
        }
        for &(fd, id) in self.fds.iter() {
            if perf_id(fd) == Some(id) {
                // SAFETY: closing a descriptor that is still this counter's.
                unsafe { libc::close(fd) };
            }
        }
        std::mem::forget(self);
    }

    /// Closes the descriptors still the counters' without touching the
    /// rest (in a forked child, for the parent's threads' counters).
    fn close_descriptors(&self) {
        for &(fd, id) in self.fds.iter() {
            if perf_id(fd) == Some(id) {
                // SAFETY: closing a descriptor that is still this counter's
                // (a copy the child inherited).
                unsafe { libc::close(fd) };
            }
        }
    }
}

/// The process's counters.
pub struct ProcessCounters {
    /// The launcher's list (records carry values in this order).
    names: Vec<String>,
    /// Each counter resolved; `None` where it is not counted per thread.
    specs: Vec<Option<CounterSpec>>,
    /// Which counters open here: decided by the first thread.
    usable: Mutex<Option<Vec<bool>>>,
    /// Each slot's thread's counters.
    by_slot: Box<[AtomicPtr<ThreadCounters>]>,
    /// Serializes opening (the descriptors are told apart from the
    /// program's by looking before and after).
    open_lock: Mutex<()>,
    /// Notes for the collector not yet written.
    pending_notes: Mutex<Vec<String>>,
    /// Threads whose counters could not be opened.
    failed_threads: AtomicU64,
}

impl ProcessCounters {
    /// Resolves the launcher's list; `None` when it is empty. Counters
    /// that cannot be counted per thread are noted and left out.
    pub fn new(names: &[String], slots: u32) -> Option<ProcessCounters> {
        if names.is_empty() {
            return None;
        }
        let mut notes = Vec::new();
        let specs = names
            .iter()
            .map(|name| match strobe_metrics::catalog::resolve(name) {
                Ok(spec) if spec.kind == CounterKind::Proc => {
                    notes.push(format!(
                        "counter `{name}` is not counted per thread: /proc values describe the \
                         whole process (the collector samples them with process_sampling_freq)"
                    ));
                    None
                }
                Ok(spec) => Some(spec),
                Err(e) => {
                    notes.push(format!("counter `{name}` is not counted: {e}"));
                    None
                }
            })
            .collect();
        Some(ProcessCounters {
            names: names.to_vec(),
            specs,
            usable: Mutex::new(None),
            by_slot: (0..slots)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
            open_lock: Mutex::new(()),
            pending_notes: Mutex::new(notes),
            failed_threads: AtomicU64::new(0),
        })
    }

    /// How many values each record carries.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// The counters of `slot`'s thread. **Signal-handler safe** (one
    /// atomic load).
    #[inline]
    fn thread(&self, slot: u32) -> Option<&ThreadCounters> {
        let p = self.by_slot.get(slot as usize)?.load(Ordering::Acquire);
        // SAFETY: published counters stay valid until their thread takes
        // them out of the table, which only that thread (or, for adopted
        // threads, nobody) does; the handler runs on the same thread.
        unsafe { p.as_ref() }
    }

    fn note(&self, text: String) {
        self.pending_notes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(text);
    }

    /// Opens `specs` (those marked in `wanted`) on `target`. Returns the
    /// counters and the configured index of each.
    fn open_subset(
        &self,
        wanted: &[bool],
        target: Target,
    ) -> Result<(Counters, Vec<usize>), CountError> {
        let mut map = Vec::new();
        let mut subset = Vec::new();
        for (i, spec) in self.specs.iter().enumerate() {
            if let (true, Some(spec)) = (wanted[i], spec) {
                map.push(i);
                subset.push(spec.clone());
            }
        }
        let mut counters = Counters::open(&subset, target, &OpenOptions::default())?;
        counters.enable()?;
        Ok((counters, map))
    }

    /// Opens the counters on `target` (a thread of this process), the
    /// first time deciding which counters open here.
    fn open(&self, target: Target) -> Result<Option<Box<ThreadCounters>>, String> {
        let _one_at_a_time = self.open_lock.lock().unwrap_or_else(|e| e.into_inner());
        let before = descriptor_numbers();
        let mut usable = self.usable.lock().unwrap_or_else(|e| e.into_inner());
        let opened = match usable.as_ref() {
            Some(flags) => {
                if !flags.iter().any(|&f| f) {
                    return Ok(None);
                }
                self.open_subset(flags, target).map_err(|e| e.to_string())?
            }
            None => {
                let mut flags: Vec<bool> = self.specs.iter().map(Option::is_some).collect();
                let opened = loop {
                    if !flags.iter().any(|&f| f) {
                        break None;
                    }
                    match self.open_subset(&flags, target) {
                        Ok(opened) => break Some(opened),
                        Err(CountError::Open { event, reason, .. }) => {
                            let at = self.specs.iter().enumerate().position(|(i, s)| {
                                flags[i] && s.as_ref().is_some_and(|s| s.name == event)
                            });
                            self.note(format!(
                                "counter `{event}` is not counted: {reason}; the run goes on \
                                 without it"
                            ));
                            match at {
                                Some(i) => flags[i] = false,
                                None => flags.iter_mut().for_each(|f| *f = false),
                            }
                        }
                        Err(e) => {
                            self.note(format!("no counter is counted: {e}"));
                            flags.iter_mut().for_each(|f| *f = false);
                        }
                    }
                };
                *usable = Some(flags);
                match opened {
                    Some(opened) => opened,
                    None => return Ok(None),
                }
            }
        };
        drop(usable);
        let (counters, map) = opened;
        let mut ours = new_perf_descriptors(&before);
        if ours.len() != counters.fd_count() {
            // Another perf event opened meanwhile (by the program): the
            // counters' own descriptors cannot be told apart. Closing them
            // now is safe (nobody could have closed them yet).
            return Err(format!(
                "{} perf descriptors appeared while opening {} counters",
                ours.len(),
                counters.fd_count()
            ));
        }
        // Kernel ids grow with every open: sorted by id, each group's
        // leader comes first, groups in order.
        ours.sort_by_key(|&(_, id)| id);
        let mut leaders = Vec::new();
        let mut at = 0;
        for g in 0..counters.group_count() {
            let size = (0..counters.len())
                .filter(|&i| counters.group_of(i) == Some(g))
                .count();
            if size > 0 {
                leaders.push(ours[at]);
            }
            at += size;
        }
        let n = counters.len();
        let tc = Box::new(ThreadCounters {
            busy: AtomicBool::new(false),
            broken: AtomicBool::new(false),
            leaders: leaders.into_boxed_slice(),
            fds: ours.into_boxed_slice(),
            state: UnsafeCell::new(State {
                counters: ManuallyDrop::new(counters),
                map: map.into_boxed_slice(),
                scratch: vec![Reading::default(); n].into_boxed_slice(),
                last: vec![COUNTER_MISSING; self.names.len()].into_boxed_slice(),
            }),
            region: UnsafeCell::new(
                vec![CounterReading::MISSING; self.names.len()].into_boxed_slice(),
            ),
        });
        // The baseline of the thread's first sample.
        // SAFETY: not published yet: this is the only user.
        let st = unsafe { &mut *tc.state.get() };
        if tc.read_fresh(st) {
            for (i, r) in st.scratch.iter().enumerate() {
                st.last[st.map[i]] = to_reading(r).scaled_total().unwrap_or(COUNTER_MISSING);
            }
        }
        Ok(Some(tc))
    }

    /// Publishes `tc` as `slot`'s counters.
    fn publish(&self, slot: u32, tc: Box<ThreadCounters>) {
        let Some(entry) = self.by_slot.get(slot as usize) else {
            // SAFETY: never published: nobody else uses it.
            unsafe { tc.close() };
            return;
        };
        let old = entry.swap(Box::into_raw(tc), Ordering::AcqRel);
        if !old.is_null() {
            // A slot reused without its thread's end (an adopted thread):
            // its counters are no longer reachable by a new handler.
            // SAFETY: the pointer came from Box::into_raw; a handler that
            // loaded it runs on its own (ended or adopted) thread only.
            unsafe { ThreadCounters::close_descriptors(&*old) };
        }
    }

    /// Hands the notes not yet written to `write_note`.
    fn flush_notes(&self, write_note: &mut impl FnMut(&[u8])) {
        let notes: Vec<String> =
            std::mem::take(&mut *self.pending_notes.lock().unwrap_or_else(|e| e.into_inner()));
        for n in notes {
            write_note(n.as_bytes());
        }
    }

    fn opened_or_noted(&self, slot: u32, target: Target, mut write_note: impl FnMut(&[u8])) {
        match self.open(target) {
            Ok(Some(tc)) => self.publish(slot, tc),
            Ok(None) => {}
            Err(e) => {
                if self.failed_threads.fetch_add(1, Ordering::Relaxed) == 0 {
                    self.note(format!(
                        "the counters could not be opened on some threads (their values are \
                         missing): {e}"
                    ));
                }
            }
        }
        self.flush_notes(&mut write_note);
    }

    /// Opens the calling thread's counters (at its start) and publishes
    /// them for `slot`; the notes not yet written (for the collector) go
    /// to `write_note`, which writes them into `slot`'s ring.
    pub fn open_for_current_thread(&self, slot: u32, write_note: impl FnMut(&[u8])) {
        self.opened_or_noted(slot, Target::Thread(0), write_note);
    }

    /// Opens the counters of thread `tid` of this process (one that
    /// existed before the runtime started), for `slot`; notes as
    /// [`ProcessCounters::open_for_current_thread`].
    pub fn open_for_thread(&self, slot: u32, tid: i32, write_note: impl FnMut(&[u8])) {
        self.opened_or_noted(slot, Target::Thread(tid), write_note);
    }

    /// The calling thread ends: its counters (published for `slot`) are
    /// closed.
    pub fn close_for_current_thread(&self, slot: u32) {
        let Some(entry) = self.by_slot.get(slot as usize) else {
            return;
        };
        let p = entry.swap(std::ptr::null_mut(), Ordering::AcqRel);
        if !p.is_null() {
            // SAFETY: from Box::into_raw; out of the table, so no new handler
            // finds it, and a handler that did runs on this thread and has
            // returned.
            unsafe { Box::from_raw(p).close() };
        }
    }

    /// In a forked child, on the parent's counters: closes the
    /// descriptors it inherited (the child's own are opened by its
    /// runtime).
    pub fn close_inherited(&self) {
        for entry in self.by_slot.iter() {
            let p = entry.swap(std::ptr::null_mut(), Ordering::AcqRel);
            // SAFETY: published counters are never freed while in the table;
            // in the child no other thread exists to free them.
            if let Some(tc) = unsafe { p.as_ref() } {
                tc.close_descriptors();
            }
        }
    }
}

/// Descriptor numbers of this process now (without the one the listing
/// itself used, closed by then).
fn descriptor_numbers() -> Vec<i32> {
    let mut out: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    // SAFETY: F_GETFD only reads the descriptor's flags.
    out.retain(|&fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } != -1);
    out.sort_unstable();
    out
}

/// Perf descriptors that exist now and were not in `before`, with their
/// kernel ids.
fn new_perf_descriptors(before: &[i32]) -> Vec<(i32, u64)> {
    descriptor_numbers()
        .into_iter()
        .filter(|fd| before.binary_search(fd).is_err())
        .filter(|fd| {
            std::fs::read_link(format!("/proc/self/fd/{fd}"))
                .is_ok_and(|l| l.as_os_str().as_encoded_bytes() == b"anon_inode:[perf_event]")
        })
        .filter_map(|fd| Some((fd, perf_id(fd)?)))
        .collect()
}

/// Runs `emit` with the bytes a region record carries: the calling
/// thread's counter readings, when the process counts (`counters`, the
/// runtime's). One branch when it does not.
#[inline]
pub fn with_region_readings<R>(
    counters: Option<&ProcessCounters>,
    slot: u32,
    emit: impl FnOnce(&[u8]) -> R,
) -> R {
    match counters {
        None => emit(&[]),
        Some(pc) => region_readings(pc, slot, emit),
    }
}

fn region_readings<R>(pc: &ProcessCounters, slot: u32, emit: impl FnOnce(&[u8]) -> R) -> R {
    let Some(tc) = pc.thread(slot) else {
        return emit(&[]);
    };
    // SAFETY: only this thread's code uses `region` (the handler never
    // does).
    let region = unsafe { &mut *tc.region.get() };
    // A failed read must not change the program's errno.
    // SAFETY: this thread's errno location is always valid.
    let errno = unsafe { *libc::__errno_location() };
    tc.with_state(|tc, st| {
        region.fill(CounterReading::MISSING);
        if tc.read_fresh(st) {
            for (i, r) in st.scratch.iter().enumerate() {
                region[st.map[i]] = to_reading(r);
            }
        }
    });
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
    // SAFETY: CounterReading is plain old data (three u64s, no padding).
    let bytes = unsafe {
        std::slice::from_raw_parts(
            region.as_ptr() as *const u8,
            region.len() * COUNTER_READING_BYTES,
        )
    };
    emit(bytes)
}

/// The counter values of every sample: the change of each counter of
/// `counters` (the current runtime's) since the thread's previous sample,
/// into `out` (configured order), missing where unknown. **Runs inside
/// the sampling signal handler** on the sampled thread (through
/// `state`'s hook): no allocation, no lock, no formatting.
pub fn sample_values(counters: Option<&ProcessCounters>, slot: u32, out: &mut [u64]) {
    out.fill(COUNTER_MISSING);
    let Some(pc) = counters else {
        return;
    };
    let Some(tc) = pc.thread(slot) else {
        return;
    };
    if tc.busy.load(Ordering::SeqCst) {
        // The thread was reading them itself: this change goes to its
        // next sample.
        return;
    }
    // SAFETY: the thread's own code is interrupted (this handler runs on
    // it) and was not using the state (`busy` clear); handlers do not
    // nest (the sampler refuses re-entry).
    let st = unsafe { &mut *tc.state.get() };
    if !tc.read_fresh(st) {
        return;
    }
    for (i, r) in st.scratch.iter().enumerate() {
        let cfg = st.map[i];
        let Some(now) = to_reading(r).scaled_total() else {
            continue;
        };
        let last = &mut st.last[cfg];
        if let (true, Some(slot)) = (*last != COUNTER_MISSING, out.get_mut(cfg)) {
            *slot = now.saturating_sub(*last);
        }
        if *last == COUNTER_MISSING || now > *last {
            *last = now;
        }
    }
}
