//! The shared-memory segment of one profiled process: a header, a table of
//! thread slots, and for each slot a sample ring and an event ring.
//!
//! The runtime creates the segment (`memfd`) in its constructor, maps it,
//! hands the descriptor to the collector and closes it; the collector maps
//! the same pages. A forked child starts with a private segment and shares
//! it (same addresses, now a `memfd`) when it first records something. Data that reached a ring therefore survives any death of
//! the program. Pages are touched only as slots are used, so memory grows
//! with the threads that exist, not with the segment's size.
//!
//! Owns the layout, creation, mapping and validation, and slot claiming.
//! Never allocates on the producer side after creation; slot claiming is
//! lock-free and runs outside signal handlers.

use crate::causal::{CausalArea, CAUSAL_BYTES};
use crate::ring::ShmRing;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};

/// `"strobeSG"`.
pub const MAGIC: u64 = 0x4753_6562_6f72_7473;
/// Layout version; the collector refuses any other.
pub const VERSION: u32 = 4;
/// Bytes of the header page area (header struct and process info).
pub const HEADER_BYTES: usize = 64 * 1024;
/// Bytes of process information the runtime can publish.
pub const INFO_BYTES: usize = 32 * 1024;
/// Bytes kept for the note about an `exec`.
pub const EXEC_NOTE_BYTES: usize = 4096;

/// What the process is doing, as the runtime last said.
pub mod state {
    /// Running with the runtime active.
    pub const RUNNING: u32 = 1;
    /// About to replace its image (`exec`); the next image (same pid) has
    /// a segment of its own, or was not profiled.
    pub const EXEC: u32 = 2;
}

/// Slot states.
pub mod slot_state {
    /// Never used, or drained and given back by the collector.
    pub const FREE: u32 = 0;
    /// Claimed by a live thread.
    pub const LIVE: u32 = 1;
    /// The thread ended: the collector drains it, then frees it.
    pub const ENDED: u32 = 2;
}

/// Why a process started from this one was not profiled (the `exec` note).
pub mod exec_reason {
    /// Nothing against it was seen.
    pub const NONE: u32 = 0;
    /// The new image has no program interpreter: nothing can be preloaded.
    pub const STATIC: u32 = 1;
    /// The new image is set-user-ID or set-group-ID: the loader ignores
    /// `LD_PRELOAD` for it.
    pub const SETUID: u32 = 2;
    /// The new environment lacks strobe's variables (cleared or replaced).
    pub const ENVIRONMENT: u32 = 3;

    /// What a process that was not profiled for `reason` did, as a
    /// predicate ("… ran a static image …").
    pub fn describe(reason: u32) -> &'static str {
        match reason {
            STATIC => "ran a static image (nothing can be preloaded into it)",
            SETUID => "ran a setuid/setgid image (the loader ignores LD_PRELOAD for it)",
            ENVIRONMENT => {
                "started with a cleared environment (strobe's runtime was not passed on)"
            }
            _ => "ran without strobe's runtime",
        }
    }
}

/// Process-wide part of the segment. Every field the collector reads
/// after creation is atomic.
#[repr(C)]
pub struct Header {
    pub magic: u64,
    pub version: u32,
    pub slots: u32,
    pub sample_ring_bytes: u32,
    pub event_ring_bytes: u32,
    pub total_bytes: u64,
    pub pid: i32,
    pub ppid: i32,
    /// `CLOCK_MONOTONIC` when the segment was created.
    pub start_ns: u64,
    /// Bytes of the process information written at creation.
    pub info_len: u32,
    /// See [`state`].
    pub state: AtomicU32,
    /// Unused (keeps the header's layout).
    pub unused: u32,
    /// A time-stamp counter reading and the `CLOCK_MONOTONIC` time it
    /// corresponds to, taken at creation: the collector's first anchor for
    /// converting the ticks of hot-path events.
    pub tsc_anchor: [u64; 2],
    /// Written by the collector: whether the CPU-time (0) and real-time
    /// (1) samplers should take samples now (delays, durations, windows).
    pub sampling_on: [AtomicU32; 2],
    /// Next never-used slot.
    pub next_slot: AtomicU32,
    /// Threads that found no free slot (not profiled).
    pub slots_exhausted: AtomicU32,
    /// See [`exec_reason`]; with the target path in the exec note.
    pub exec_reason: AtomicU32,
    pub exec_note_len: AtomicU32,
    /// Signals chosen for the CPU-time and real-time samplers (0 = none).
    pub signals: [AtomicI32; 2],
    /// Event records a thread waited for the collector to make room for.
    pub event_waits: AtomicU64,
    pub event_wait_ns: AtomicU64,
    /// Event records dropped (discard policy, wait bound, or nested use).
    pub events_dropped: AtomicU64,
    /// Samples taken while the thread was not the slot's (ignored).
    pub reserved: [AtomicU64; 4],
}

/// One thread's slot. 384 bytes; fields written by the producer at a high
/// rate sit on cache lines of their own.
#[repr(C, align(64))]
pub struct Slot {
    pub state: AtomicU32,
    pub tid: AtomicI32,
    /// Set while the thread writes an event (a nested writer drops).
    pub event_busy: AtomicU32,
    pub _pad0: u32,
    /// `CLOCK_MONOTONIC` ns since which the thread has the sampling signal
    /// blocked; 0 while it does not.
    pub blocked_since: AtomicU64,
    /// Nanoseconds the thread had it blocked before that.
    pub blocked_ns: AtomicU64,
    /// Samples written.
    pub taken: AtomicU64,
    /// Samples dropped: full ring.
    pub lost_full: AtomicU64,
    /// Samples dropped: a sample was already being taken on the thread.
    pub lost_reentrant: AtomicU64,
    /// Timer expirations the kernel merged.
    pub overruns: AtomicU64,
    /// Samples whose unwind stopped early.
    pub incomplete: AtomicU64,
    /// Causal profiling: the delay (ns) this thread has paid or been
    /// credited (it owes the process's global delay minus this).
    pub causal_local: AtomicU64,
    /// Causal profiling: the global delay when the thread last blocked.
    pub causal_blocked_at: AtomicU64,
    /// Samples dropped: the signal arrived on an alternate signal stack
    /// (a program's handler, or its `siglongjmp` out of one) with too
    /// little room below for strobe's handler.
    pub lost_altstack: AtomicU64,
    pub sample_head: Line,
    pub sample_tail: Line,
    pub event_head: Line,
    pub event_tail: Line,
}

/// An index alone on its cache line.
#[repr(C, align(64))]
pub struct Line(pub AtomicU64);

const _: () = assert!(std::mem::size_of::<Slot>() == 384);
const _: () = assert!(std::mem::size_of::<Header>() <= HEADER_BYTES - INFO_BYTES - EXEC_NOTE_BYTES);

/// Sizes of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Thread slots (threads alive at once).
    pub slots: u32,
    /// Bytes of each thread's sample ring (power of two).
    pub sample_ring_bytes: u32,
    /// Bytes of each thread's event ring (power of two).
    pub event_ring_bytes: u32,
}

impl Layout {
    fn slot_table(&self) -> usize {
        HEADER_BYTES + CAUSAL_BYTES
    }

    fn rings(&self) -> usize {
        align_page(self.slot_table() + self.slots as usize * std::mem::size_of::<Slot>())
    }

    fn per_slot(&self) -> usize {
        self.sample_ring_bytes as usize + self.event_ring_bytes as usize
    }

    /// Total bytes of the segment.
    pub fn total(&self) -> usize {
        self.rings() + self.slots as usize * self.per_slot()
    }

    fn valid(&self) -> bool {
        let ring_ok = |b: u32| b.is_power_of_two() && (4096..=1 << 26).contains(&b);
        (1..=1 << 16).contains(&self.slots)
            && ring_ok(self.sample_ring_bytes)
            && ring_ok(self.event_ring_bytes)
    }
}

fn align_page(n: usize) -> usize {
    (n + 4095) & !4095
}

/// A mapped segment. Unmapped when dropped, unless leaked with
/// [`Segment::leak`] (the runtime's own segment lives as long as the
/// process).
pub struct Segment {
    base: *mut u8,
    len: usize,
    layout: Layout,
}

// SAFETY: the segment is shared memory accessed through atomics and the
// single-producer/single-consumer rings.
unsafe impl Send for Segment {}
// SAFETY: as above.
unsafe impl Sync for Segment {}

/// The seals of every segment: its size can never change again.
const SEALS: libc::c_int = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;

/// A new memfd (close-on-exec) of `len` zero bytes whose size can never
/// change again: the collector reads every byte of a segment, and a file
/// shrunk under a mapping faults its readers. Its bytes stay writable.
pub fn sealed_memfd(len: usize) -> io::Result<OwnedFd> {
    // SAFETY: a NUL-terminated name and valid flags.
    let fd = unsafe {
        libc::memfd_create(
            c"strobe".as_ptr(),
            libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor we just created and own.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: resizing our own memfd.
    if unsafe { libc::ftruncate(fd, len as libc::off_t) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: sealing our own memfd.
    if unsafe { libc::fcntl(fd, libc::F_ADD_SEALS, SEALS) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(owned)
}

/// Refuses a layout the segment cannot have.
fn check_layout(layout: Layout) -> io::Result<()> {
    if layout.valid() {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "bad segment layout",
        ))
    }
}

fn map(fd: i32, len: usize) -> io::Result<*mut u8> {
    // SAFETY: mapping `len` bytes of a descriptor we hold; no address hint.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(base as *mut u8)
}

impl Segment {
    /// Creates a segment (an anonymous `memfd`, sized but untouched) and
    /// maps it. Returns the mapping and its descriptor (close-on-exec),
    /// which the caller hands to the collector and then closes.
    ///
    /// `start_ns` is `CLOCK_MONOTONIC` now; `tsc_anchor` a time-stamp
    /// counter reading and the `CLOCK_MONOTONIC` time it corresponds to,
    /// read together just before (`strobe_core::clock::tsc_pair`): the
    /// collector's first anchor for converting the ticks of hot-path
    /// events ([`Header::tsc_anchor`]).
    pub fn create(
        layout: Layout,
        pid: i32,
        ppid: i32,
        start_ns: u64,
        tsc_anchor: (u64, u64),
    ) -> io::Result<(Segment, OwnedFd)> {
        check_layout(layout)?;
        let len = layout.total();
        let owned = sealed_memfd(len)?;
        let base = map(owned.as_raw_fd(), len)?;
        let segment = Segment { base, len, layout };
        segment.init_header(pid, ppid, start_ns, tsc_anchor);
        Ok((segment, owned))
    }

    /// Creates a segment in private anonymous memory, seen by no other
    /// process: what a forked child writes until it records something of
    /// the program's. [`Segment::share`] moves it into a `memfd` at the
    /// same addresses. The arguments are [`Segment::create`]'s.
    pub fn create_private(
        layout: Layout,
        pid: i32,
        ppid: i32,
        start_ns: u64,
        tsc_anchor: (u64, u64),
    ) -> io::Result<Segment> {
        check_layout(layout)?;
        let len = layout.total();
        // SAFETY: a fresh anonymous mapping; no address hint.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let segment = Segment {
            base: base as *mut u8,
            len,
            layout,
        };
        segment.init_header(pid, ppid, start_ns, tsc_anchor);
        Ok(segment)
    }

    /// Writes the header of a fresh, zeroed mapping.
    fn init_header(&self, pid: i32, ppid: i32, start_ns: u64, tsc_anchor: (u64, u64)) {
        // SAFETY: the header lies at the start of the fresh, zeroed mapping;
        // nobody else sees it yet.
        let h = unsafe { &mut *(self.base as *mut Header) };
        h.version = VERSION;
        h.slots = self.layout.slots;
        h.sample_ring_bytes = self.layout.sample_ring_bytes;
        h.event_ring_bytes = self.layout.event_ring_bytes;
        h.total_bytes = self.len as u64;
        h.pid = pid;
        h.ppid = ppid;
        h.start_ns = start_ns;
        h.tsc_anchor = [tsc_anchor.0, tsc_anchor.1];
        h.state.store(state::RUNNING, Ordering::Relaxed);
        h.magic = MAGIC;
    }

    /// Moves a segment made by [`Segment::create_private`] into a fresh
    /// sealed `memfd` mapped over the same addresses (`MAP_FIXED`), and
    /// returns the descriptor to hand to the collector. What was written
    /// is copied page by page, pages that are all zero left out: the
    /// header and causal area, the slot table's used entries, and both
    /// rings of every slot ever claimed. **Signal handler**: system calls
    /// and copies only; it allocates, locks and formats nothing. The
    /// caller makes sure nothing writes to the segment meanwhile (one
    /// thread, every signal blocked). On an error the segment stays
    /// private and unchanged.
    pub fn share(&self) -> io::Result<OwnedFd> {
        let fd = sealed_memfd(self.len)?;
        let slot_table = self.layout.slot_table();
        let used = self
            .header()
            .next_slot
            .load(Ordering::Acquire)
            .min(self.layout.slots) as usize;
        self.copy_pages(&fd, 0, slot_table)?;
        self.copy_pages(
            &fd,
            slot_table,
            slot_table + used * std::mem::size_of::<Slot>(),
        )?;
        for i in 0..used {
            let rings = self.layout.rings() + i * self.layout.per_slot();
            self.copy_pages(&fd, rings, rings + self.layout.per_slot())?;
        }
        // SAFETY: replaces exactly this segment's mapping, at the same
        // addresses and size, with the memfd just filled with its contents.
        let base = unsafe {
            libc::mmap(
                self.base as *mut libc::c_void,
                self.len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_FIXED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(fd)
    }

    /// Writes the pages of `[from, to)` (widened to whole pages) that are
    /// not all zero into `fd` at their own offsets. **Signal handler**.
    fn copy_pages(&self, fd: &OwnedFd, from: usize, to: usize) -> io::Result<()> {
        const PAGE: usize = 4096;
        let mut off = from & !(PAGE - 1);
        let end = to.min(self.len);
        while off < end {
            // SAFETY: a whole page inside the mapping (the length is a
            // multiple of the page size), read as words.
            let words =
                unsafe { std::slice::from_raw_parts(self.base.add(off) as *const u64, PAGE / 8) };
            if words.iter().any(|&w| w != 0) {
                let mut done = 0;
                while done < PAGE {
                    // SAFETY: writing bytes of the mapping to our memfd.
                    let n = unsafe {
                        libc::pwrite(
                            fd.as_raw_fd(),
                            self.base.add(off + done) as *const libc::c_void,
                            PAGE - done,
                            (off + done) as libc::off_t,
                        )
                    };
                    if n < 0 {
                        let e = io::Error::last_os_error();
                        if e.kind() != io::ErrorKind::Interrupted {
                            return Err(e);
                        }
                    } else {
                        done += n as usize;
                    }
                }
            }
            off += PAGE;
        }
        Ok(())
    }

    /// Maps a segment received from a runtime and checks its header.
    pub fn open(fd: &OwnedFd) -> io::Result<Segment> {
        let bad = |what: &str| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("not a strobe segment: {what}"),
            )
        };
        // SAFETY: stat is plain old data filled by fstat.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: a valid descriptor and out-pointer.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: querying the seals of a descriptor we hold.
        let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
        if seals < 0 || seals & SEALS != SEALS {
            return Err(bad(
                "its size is not sealed (it could shrink under the reader)",
            ));
        }
        let file_len = st.st_size as usize;
        if file_len < HEADER_BYTES {
            return Err(bad("too small"));
        }
        let probe = map(fd.as_raw_fd(), HEADER_BYTES)?;
        // SAFETY: the first HEADER_BYTES are mapped and hold the header.
        let h = unsafe { &*(probe as *const Header) };
        let (magic, version) = (h.magic, h.version);
        let layout = Layout {
            slots: h.slots,
            sample_ring_bytes: h.sample_ring_bytes,
            event_ring_bytes: h.event_ring_bytes,
        };
        // SAFETY: unmapping the probe mapping made above.
        unsafe { libc::munmap(probe as *mut libc::c_void, HEADER_BYTES) };
        if magic != MAGIC {
            return Err(bad("wrong magic number"));
        }
        if version != VERSION {
            return Err(bad(&format!(
                "layout version {version}, this strobe reads {VERSION}"
            )));
        }
        if !layout.valid() || layout.total() != file_len {
            return Err(bad("sizes do not match"));
        }
        let base = map(fd.as_raw_fd(), file_len)?;
        Ok(Segment {
            base,
            len: file_len,
            layout,
        })
    }

    /// Keeps the mapping for the life of the process.
    pub fn leak(self) -> &'static Segment {
        Box::leak(Box::new(self))
    }

    /// The sizes.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The header.
    pub fn header(&self) -> &Header {
        // SAFETY: the header lies at the start of the mapping.
        unsafe { &*(self.base as *const Header) }
    }

    fn info_area(&self) -> *mut u8 {
        // SAFETY: the info area lies inside the header pages.
        unsafe { self.base.add(HEADER_BYTES - INFO_BYTES - EXEC_NOTE_BYTES) }
    }

    /// Writes the process information (once, before the segment is handed
    /// over). Longer input is cut at [`INFO_BYTES`].
    pub fn write_info(&self, info: &[u8]) {
        let n = info.len().min(INFO_BYTES);
        // SAFETY: n bytes fit the info area; no reader yet.
        unsafe { std::ptr::copy_nonoverlapping(info.as_ptr(), self.info_area(), n) };
        // SAFETY: as above; the header is ours until handed over.
        unsafe { (*(self.base as *mut Header)).info_len = n as u32 };
    }

    /// The process information.
    pub fn info(&self) -> Vec<u8> {
        let n = (self.header().info_len as usize).min(INFO_BYTES);
        // SAFETY: n bytes of the info area.
        unsafe { std::slice::from_raw_parts(self.info_area(), n) }.to_vec()
    }

    fn exec_note_area(&self) -> *mut u8 {
        // SAFETY: the note area lies inside the header pages.
        unsafe { self.base.add(HEADER_BYTES - EXEC_NOTE_BYTES) }
    }

    /// Says the process is about to `exec` `target`, and why the new image
    /// will not be profiled if that is already known. Not for signal
    /// handlers (a plain copy, but called around `exec` only).
    pub fn note_exec(&self, target: &[u8], reason: u32) {
        let n = target.len().min(EXEC_NOTE_BYTES);
        // SAFETY: n bytes fit the note area.
        unsafe { std::ptr::copy_nonoverlapping(target.as_ptr(), self.exec_note_area(), n) };
        let h = self.header();
        h.exec_note_len.store(n as u32, Ordering::Release);
        h.exec_reason.store(reason, Ordering::Release);
        h.state.store(state::EXEC, Ordering::Release);
    }

    /// The exec failed: the process goes on with this image.
    pub fn exec_failed(&self) {
        self.header().state.store(state::RUNNING, Ordering::Release);
    }

    /// The last exec note: target path and reason.
    pub fn exec_note(&self) -> (Vec<u8>, u32) {
        let h = self.header();
        let n = (h.exec_note_len.load(Ordering::Acquire) as usize).min(EXEC_NOTE_BYTES);
        // SAFETY: n bytes of the note area.
        let target = unsafe { std::slice::from_raw_parts(self.exec_note_area(), n) }.to_vec();
        (target, h.exec_reason.load(Ordering::Acquire))
    }

    /// The causal-profiling area (after the header pages).
    pub fn causal(&self) -> &CausalArea {
        // SAFETY: the causal area lies after the header, inside the
        // mapping, and is all atomics (zero is a valid value).
        unsafe { &*(self.base.add(HEADER_BYTES) as *const CausalArea) }
    }

    /// Slot `i`. Panics if out of range (a caller bug).
    pub fn slot(&self, i: u32) -> &Slot {
        assert!(i < self.layout.slots);
        // SAFETY: the slot table lies after the header; `i` is in range.
        unsafe {
            &*(self
                .base
                .add(self.layout.slot_table() + i as usize * std::mem::size_of::<Slot>())
                as *const Slot)
        }
    }

    /// Slots that were ever claimed (the rest are untouched).
    pub fn slots_in_use(&self) -> u32 {
        self.header()
            .next_slot
            .load(Ordering::Acquire)
            .min(self.layout.slots)
    }

    fn ring_data(&self, i: u32) -> *mut u8 {
        // SAFETY: the rings of slot i lie inside the mapping.
        unsafe {
            self.base
                .add(self.layout.rings() + i as usize * self.layout.per_slot())
        }
    }

    /// The sample ring of slot `i` (written by the thread's signal handler).
    pub fn sample_ring(&self, i: u32) -> ShmRing {
        let slot = self.slot(i);
        // SAFETY: indices and data lie inside the mapping, which outlives
        // every use by contract of the callers (the runtime leaks its
        // segment; the collector drops rings before the segment).
        unsafe {
            ShmRing::new(
                &slot.sample_head.0,
                &slot.sample_tail.0,
                self.ring_data(i),
                self.layout.sample_ring_bytes as usize,
            )
        }
    }

    /// The event ring of slot `i` (written by the thread's own code).
    pub fn event_ring(&self, i: u32) -> ShmRing {
        let slot = self.slot(i);
        // SAFETY: as for sample_ring.
        unsafe {
            ShmRing::new(
                &slot.event_head.0,
                &slot.event_tail.0,
                self.ring_data(i)
                    .add(self.layout.sample_ring_bytes as usize),
                self.layout.event_ring_bytes as usize,
            )
        }
    }

    /// Claims a free slot for thread `tid` (never-used slots first, then
    /// slots the collector gave back). `None` when every slot is taken.
    /// Not for signal handlers (it may scan the table).
    pub fn claim_slot(&self, tid: i32) -> Option<u32> {
        let h = self.header();
        let fresh = h.next_slot.fetch_add(1, Ordering::AcqRel);
        let Some(i) = self.claim_from(fresh) else {
            h.slots_exhausted.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        let slot = self.slot(i);
        slot.tid.store(tid, Ordering::Release);
        slot.event_busy.store(0, Ordering::Relaxed);
        for c in [
            &slot.blocked_since,
            &slot.blocked_ns,
            &slot.taken,
            &slot.lost_full,
            &slot.lost_reentrant,
            &slot.overruns,
            &slot.incomplete,
            &slot.causal_blocked_at,
            &slot.lost_altstack,
        ] {
            c.store(0, Ordering::Relaxed);
        }
        // A new thread owes no delay inserted before it existed.
        let global = self.causal().global_delay.load(Ordering::Acquire);
        slot.causal_local.store(global, Ordering::Relaxed);
        Some(i)
    }

    /// The slot a claimer that drew never-used index `fresh` gets: that
    /// one, unless every never-used slot was drawn already (`fresh` is past
    /// the table) or a claimer that drew past the table took it by its scan
    /// between the draw and now; then the first free slot. Every slot goes
    /// from free to live by one compare-and-swap, so no two claimers ever
    /// get the same slot.
    fn claim_from(&self, fresh: u32) -> Option<u32> {
        let live = |i: u32| {
            self.slot(i)
                .state
                .compare_exchange(
                    slot_state::FREE,
                    slot_state::LIVE,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
        };
        if fresh < self.layout.slots {
            if live(fresh) {
                return Some(fresh);
            }
        } else {
            self.header()
                .next_slot
                .store(self.layout.slots, Ordering::Release);
        }
        (0..self.layout.slots).find(|&i| live(i))
    }

    /// The thread of slot `i` ended: the collector drains and frees it.
    pub fn end_slot(&self, i: u32) {
        self.slot(i)
            .state
            .store(slot_state::ENDED, Ordering::Release);
    }

    /// Collector: gives an ended, drained slot back.
    pub fn free_slot(&self, i: u32) -> bool {
        self.slot(i)
            .state
            .compare_exchange(
                slot_state::ENDED,
                slot_state::FREE,
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_ok()
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping this value owns.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

#[cfg(test)]
mod tests;
