//! MPI calls as regions, through MPI's standard profiling interface: the
//! runtime defines `MPI_*` (C) and `mpi_*_` (Fortran) functions that call
//! the library's `PMPI_*` and record each call, with its arguments (bytes,
//! peer, tag, root, communicator and its size) and, for point-to-point
//! messages, a key that is the same on the sending and the receiving rank
//! (so post-processing pairs them without talking to other ranks). At
//! `MPI_Init` and `MPI_Finalize` each rank compares its clock with rank 0
//! ([`clock_sync`]).
//!
//! Owns the wrappers' shared state: which MPI interface the process uses
//! ([`abi`]), communicators' ids, message counters, receives still pending
//! on a request, and turning a finished call into an `MPI_CALL` record.
//! It never changes what a call does: arguments reach the library
//! unchanged (a receive told to ignore its status is given a private one
//! the program never sees), results and `errno` are the library's. It
//! never records a call made while another is being recorded on the same
//! thread (an MPI library calling its own `MPI_` functions, Fortran
//! bindings calling C ones): only the outermost call is the program's.
//! Without `strobe sample` nothing here runs (the runtime is not loaded);
//! with it, a program that never calls MPI never reaches this code.

pub mod abi;
mod calls;
pub mod clock_sync;
mod fortran;

use crate::events::{emit, emit_ticks};
use crate::interpose::{real, RealFn};
use crate::state::{current, Runtime};
use abi::{abi, Handle};
use libc::c_int;
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, RwLock};
use strobe_core::clock::now_ns;
use strobe_wire::record::{as_bytes, event, mpi_fields, MpiCallBody, MPI_FUNCTIONS};

/// The index of `name` in [`MPI_FUNCTIONS`] (checked when compiled).
pub const fn function(name: &str) -> u16 {
    let mut i = 0;
    while i < MPI_FUNCTIONS.len() {
        if eq(MPI_FUNCTIONS[i].as_bytes(), name.as_bytes()) {
            return i as u16;
        }
        i += 1;
    }
    panic!("not an MPI function strobe records")
}

const fn eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

thread_local! {
    /// MPI calls being recorded on this thread (0 or 1).
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    /// The communicator this thread looked up last, with the value of
    /// [`COMMS_CHANGED`] then.
    static LAST_COMM: Cell<Option<(Handle, u64, &'static CommInfo)>> = const { Cell::new(None) };
    /// The datatype this thread sized last, with the value of
    /// [`TYPES_CHANGED`] then, and its size.
    static LAST_TYPE: Cell<Option<(Handle, u64, c_int)>> = const { Cell::new(None) };
}

/// The `PMPI_` functions the recording itself calls.
static PMPI_COMM_SIZE: RealFn = RealFn::new(c"PMPI_Comm_size");
static PMPI_COMM_RANK: RealFn = RealFn::new(c"PMPI_Comm_rank");
static PMPI_TYPE_SIZE: RealFn = RealFn::new(c"PMPI_Type_size");
static PMPI_GET_COUNT: RealFn = RealFn::new(c"PMPI_Get_count");
static PMPI_COMM_GROUP: RealFn = RealFn::new(c"PMPI_Comm_group");
static PMPI_GROUP_TRANSLATE: RealFn = RealFn::new(c"PMPI_Group_translate_ranks");
static PMPI_GROUP_FREE: RealFn = RealFn::new(c"PMPI_Group_free");

/// `PMPI_Comm_size` and `PMPI_Comm_rank` of `comm`; (0, -1) when MPI
/// refuses (a freed or inter-communicator).
fn size_and_rank(comm: Handle) -> (i32, i32) {
    let size_fn = real!(PMPI_COMM_SIZE as fn(Handle, *mut c_int) -> c_int);
    let rank_fn = real!(PMPI_COMM_RANK as fn(Handle, *mut c_int) -> c_int);
    let (mut size, mut rank) = (0, -1);
    // SAFETY: a communicator handle the program passed, and out-pointers
    // to locals.
    let ok = unsafe { size_fn(comm, &mut size) == 0 && rank_fn(comm, &mut rank) == 0 };
    if ok {
        (size, rank)
    } else {
        (0, -1)
    }
}

/// Bumped whenever the program frees a datatype (its handle may come
/// back for another type): threads' cached sizes older than it are stale.
static TYPES_CHANGED: AtomicU64 = AtomicU64::new(0);

/// A datatype was freed.
fn type_freed() {
    TYPES_CHANGED.fetch_add(1, Ordering::AcqRel);
}

/// Bytes of `count` elements of `datatype` (0 when MPI refuses).
fn type_bytes(count: c_int, datatype: Handle) -> u64 {
    let key = abi().handle(datatype);
    let changed = TYPES_CHANGED.load(Ordering::Acquire);
    let size = match LAST_TYPE.try_with(Cell::get) {
        Ok(Some((h, seen, size))) if h == key && seen == changed => size,
        _ => {
            let size_fn = real!(PMPI_TYPE_SIZE as fn(Handle, *mut c_int) -> c_int);
            let mut size = 0;
            // SAFETY: a datatype the program passed and an out-pointer to
            // a local.
            if unsafe { size_fn(datatype, &mut size) } != 0 {
                return 0;
            }
            let _ = LAST_TYPE.try_with(|last| last.set(Some((key, changed, size))));
            size
        }
    };
    u64::try_from(count).unwrap_or(0) * u64::try_from(size).unwrap_or(0)
}

/// Bytes a filled status says were received (0 when unknown).
///
/// # Safety
/// `status` points to a filled `MPI_Status`.
unsafe fn received_bytes(status: *const u8) -> u64 {
    let count_fn = real!(PMPI_GET_COUNT as fn(*const u8, Handle, *mut c_int) -> c_int);
    let mut n: c_int = 0;
    // SAFETY: contract, the interface's MPI_BYTE, an out-pointer to a local.
    if unsafe { count_fn(status, abi().byte, &mut n) } != 0 {
        return 0;
    }
    u64::try_from(n).unwrap_or(0)
}

/// The `MPI_COMM_WORLD` rank of rank 0 of `comm` (-1 when unknown).
fn world_rank_of_first(comm: Handle) -> i32 {
    let group_fn = real!(PMPI_COMM_GROUP as fn(Handle, *mut u8) -> c_int);
    let translate =
        real!(PMPI_GROUP_TRANSLATE as fn(Handle, c_int, *const c_int, Handle, *mut c_int) -> c_int);
    let free_fn = real!(PMPI_GROUP_FREE as fn(*mut u8) -> c_int);
    let a = abi();
    let (mut g, mut w) = ([0u8; 8], [0u8; 8]);
    let (zero, mut out) = (0, -1);
    // SAFETY: handles the program passed (or the world's), out-pointers to
    // locals big enough for a handle of either interface; groups are
    // freed again.
    unsafe {
        if group_fn(comm, g.as_mut_ptr()) != 0 {
            return -1;
        }
        if group_fn(a.comm_world, w.as_mut_ptr()) == 0 {
            let (gh, wh) = (a.read_handle(g.as_ptr()), a.read_handle(w.as_ptr()));
            translate(gh, 1, &zero, wh, &mut out);
            free_fn(w.as_mut_ptr());
        }
        free_fn(g.as_mut_ptr());
    }
    out
}

/// A communicator as the records name it.
#[derive(Debug)]
pub struct CommInfo {
    /// Equal on every rank for the same communicator: `world`, `self`,
    /// `world.2@0` (the second communicator made from world, whose rank 0
    /// is world rank 0), or `comm@R/N` for one made by a call strobe does
    /// not wrap (rank 0 = world rank R, N ranks).
    pub id: Box<str>,
    /// Hash of `id`, for message keys.
    hash: u64,
    pub size: i32,
    /// This process's rank in it.
    pub rank: i32,
}

static COMMS: RwLock<Map<Handle, &'static CommInfo>> = RwLock::new(Map::with_hasher(Fast));
/// Bumped whenever a communicator is made or freed: threads' cached
/// lookups older than it are stale.
static COMMS_CHANGED: AtomicU64 = AtomicU64::new(0);
/// Communicators made from each communicator so far, by its id.
static MADE: Mutex<Map<Box<str>, u32>> = Mutex::new(Map::with_hasher(Fast));
/// One-sided windows' communicators.
static WINDOWS: Mutex<Map<Handle, &'static CommInfo>> = Mutex::new(Map::with_hasher(Fast));
/// Messages counted per (communicator, source, destination, tag, sent).
static MESSAGES: Mutex<Map<MessageChannel, u64>> = Mutex::new(Map::with_hasher(Fast));
/// (communicator hash, source, destination, tag, counted by the sender).
type MessageChannel = (u64, i32, i32, i32, bool);
/// Receives posted with a request and not yet completed, by request.
static PENDING: Mutex<Map<Handle, &'static CommInfo>> = Mutex::new(Map::with_hasher(Fast));
/// Entries in [`PENDING`] (read without its lock: most waits complete
/// sends only).
static PENDING_COUNT: AtomicUsize = AtomicUsize::new(0);

/// A hash map with [`Fast`] hashing.
type Map<K, V> = HashMap<K, V, Fast>;

/// Hashing for the wrappers' small integer keys (handles, message
/// counters): a multiply-and-fold per word, not the DoS-resistant default
/// (keys come from the program's own MPI library, not from outside).
#[derive(Clone, Copy, Default)]
struct Fast;

impl std::hash::BuildHasher for Fast {
    type Hasher = FastHasher;
    fn build_hasher(&self) -> FastHasher {
        FastHasher(0x9e37_79b9_7f4a_7c15)
    }
}

struct FastHasher(u64);

impl std::hash::Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    fn write_i32(&mut self, v: i32) {
        self.write_u64(v as u32 as u64);
    }
    fn write_u8(&mut self, v: u8) {
        self.write_u64(u64::from(v));
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
}
/// Most pending receives remembered (requests freed without completion
/// are never seen again).
const MAX_PENDING: usize = 1 << 20;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A 64-bit hash of `parts`, word by word, with a splitmix64 finish.
fn hash(parts: &[u64]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        h = (h.rotate_left(5) ^ p).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

fn text_hash(text: &str) -> u64 {
    let words: Vec<u64> = text.bytes().map(u64::from).collect();
    hash(&words)
}

/// A communicator's description, kept for the life of the process
/// (communicators are few; a freed one's description stays behind, a
/// hundred bytes, so that lookups need no reference counting).
fn info(id: String, size: i32, rank: i32) -> &'static CommInfo {
    Box::leak(Box::new(CommInfo {
        hash: text_hash(&id),
        id: id.into_boxed_str(),
        size,
        rank,
    }))
}

/// What the records say about communicator `comm`.
pub fn comm(comm: Handle) -> &'static CommInfo {
    let a = abi();
    let key = a.handle(comm);
    let changed = COMMS_CHANGED.load(Ordering::Acquire);
    let cached = LAST_COMM
        .try_with(|last| match last.get() {
            Some((h, seen, c)) if h == key && seen == changed => Some(c),
            _ => None,
        })
        .ok()
        .flatten();
    if let Some(c) = cached {
        return c;
    }
    let c = comm_uncached(comm, key);
    let _ = LAST_COMM.try_with(|last| last.set(Some((key, changed, c))));
    c
}

/// [`comm`] without the thread's cache.
fn comm_uncached(comm: Handle, key: Handle) -> &'static CommInfo {
    let a = abi();
    if let Some(c) = COMMS.read().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return c;
    }
    let (size, rank) = size_and_rank(comm);
    let id = if key == a.handle(a.comm_world) {
        "world".to_string()
    } else if key == a.handle(a.comm_self) {
        "self".to_string()
    } else {
        format!("comm@{}/{size}", world_rank_of_first(comm))
    };
    let c = info(id, size, rank);
    COMMS
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, c);
    c
}

/// Communicator `made` was created from `parent` by a collective call
/// every member of `parent` made (in the same order on every rank).
fn comm_made(parent: Handle, made: Handle) {
    let a = abi();
    let parent = comm(parent);
    let n = {
        let mut counts = lock(&MADE);
        let n = counts.entry(parent.id.clone()).or_insert(0);
        *n += 1;
        *n
    };
    if a.handle(made) == a.handle(a.comm_null) {
        return;
    }
    let (size, rank) = size_and_rank(made);
    let id = format!("{}.{n}@{}", parent.id, world_rank_of_first(made));
    COMMS
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .insert(a.handle(made), info(id, size, rank));
    COMMS_CHANGED.fetch_add(1, Ordering::AcqRel);
}

/// Communicator `freed` is gone (its handle may come back for another).
fn comm_freed(freed: Handle) {
    COMMS
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&abi().handle(freed));
    COMMS_CHANGED.fetch_add(1, Ordering::AcqRel);
}

/// The key of the next message from `source` to `dest` with `tag` on
/// `comm`, counted on the sending side (`sent`) or the receiving one: the
/// n-th message between two ranks with one tag on one communicator has the
/// same key on both (MPI delivers them in order). Positive, below 2^63.
fn message_key(comm: &CommInfo, source: i32, dest: i32, tag: i32, sent: bool) -> u64 {
    let n = {
        let mut counts = lock(&MESSAGES);
        let n = counts
            .entry((comm.hash, source, dest, tag, sent))
            .or_insert(0);
        *n += 1;
        *n
    };
    let key = hash(&[comm.hash, source as u64, dest as u64, tag as u64, n]);
    (key >> 1).max(1)
}

/// Now, as the records stamp it: time-stamp counter ticks where the
/// launcher found them reliable (the collector converts them; a tenth of
/// the cost of `clock_gettime` on some virtual machines), else
/// `CLOCK_MONOTONIC` nanoseconds.
#[inline]
fn stamp(tsc: bool) -> u64 {
    if tsc {
        strobe_core::clock::cycles()
    } else {
        now_ns()
    }
}

/// One MPI call being recorded: made by a wrapper before it calls the
/// library, emitted after.
pub struct Call {
    rt: &'static Runtime,
    slot: u32,
    end: u64,
    body: MpiCallBody,
    comm: Option<&'static CommInfo>,
    more_in: Vec<u64>,
}

impl Call {
    /// Starts recording a call of `function` (see [`function`]); `None`
    /// when nothing is recorded (not profiling regions, paused, or inside
    /// another recorded call): the wrapper then only forwards.
    #[inline]
    pub fn enter(function: u16) -> Option<Call> {
        if DEPTH.try_with(Cell::get).unwrap_or(1) != 0 {
            return None;
        }
        let rt = current()?;
        if !rt.config.tracing || rt.paused.load(Ordering::Relaxed) {
            return None;
        }
        let slot = crate::thread_slot::slot_of_current_thread(rt)?;
        DEPTH.with(|d| d.set(1));
        let tsc = rt.config.tsc;
        Some(Call {
            rt,
            slot,
            end: 0,
            body: MpiCallBody {
                begin_ns: stamp(tsc),
                function,
                fields: if tsc { mpi_fields::TICKS } else { 0 },
                ..Default::default()
            },
            comm: None,
            more_in: Vec::new(),
        })
    }

    /// Whether a call entered now would be recorded.
    pub fn recording() -> bool {
        DEPTH.try_with(Cell::get).unwrap_or(1) == 0
            && current().is_some_and(|rt| rt.config.tracing && !rt.paused.load(Ordering::Relaxed))
    }

    /// The library returned.
    #[inline]
    pub fn returned(&mut self) {
        self.end = stamp(self.body.fields & mpi_fields::TICKS != 0);
    }

    fn set(&mut self, field: u16) {
        self.body.fields |= field;
    }

    /// The call runs on communicator `c`.
    pub fn on(&mut self, c: Handle) -> &'static CommInfo {
        let c = comm(c);
        self.body.comm_size = c.size;
        self.comm = Some(c);
        c
    }

    /// The call runs on window `w`'s communicator (when known).
    pub fn on_window(&mut self, w: Handle) {
        if let Some(c) = lock(&WINDOWS).get(&abi().handle(w)).copied() {
            self.body.comm_size = c.size;
            self.comm = Some(c);
        }
    }

    /// The call sends `n` bytes.
    pub fn bytes(&mut self, n: u64) {
        self.body.bytes = self.body.bytes.saturating_add(n);
        self.set(mpi_fields::BYTES);
    }

    /// The call receives `n` bytes.
    pub fn recv_bytes(&mut self, n: u64) {
        self.body.recv_bytes = self.body.recv_bytes.saturating_add(n);
        self.set(mpi_fields::RECV_BYTES);
    }

    pub fn peer(&mut self, rank: c_int) {
        self.body.peer = rank;
        self.set(mpi_fields::PEER);
    }

    pub fn tag(&mut self, tag: c_int) {
        if tag != abi().any_tag {
            self.body.tag = tag;
            self.set(mpi_fields::TAG);
        }
    }

    pub fn root(&mut self, root: c_int) {
        self.body.root = root;
        self.set(mpi_fields::ROOT);
    }

    /// A point-to-point send of `count` × `datatype` to `dest` with `tag`
    /// on `c`.
    pub fn send(&mut self, count: c_int, datatype: Handle, dest: c_int, tag: c_int, c: Handle) {
        self.send_bytes(type_bytes(count, datatype), dest, tag, c);
    }

    /// A point-to-point send of `bytes` to `dest` with `tag` on `c`.
    pub fn send_bytes(&mut self, bytes: u64, dest: c_int, tag: c_int, c: Handle) {
        let info = self.on(c);
        self.bytes(bytes);
        self.peer(dest);
        self.tag(tag);
        if dest >= 0 && dest != abi().proc_null {
            self.body.flow_out = message_key(info, info.rank, dest, tag, true);
            self.set(mpi_fields::FLOW_OUT);
        }
    }

    /// A message arrived on `c`, described by the filled `status`.
    ///
    /// # Safety
    /// `status` points to a filled `MPI_Status`.
    pub unsafe fn received(&mut self, c: &CommInfo, status: *const u8) {
        let a = abi();
        // SAFETY: contract.
        let (source, tag) = unsafe { a.source_and_tag(status) };
        if source < 0 || source == a.proc_null {
            return;
        }
        // SAFETY: contract.
        self.recv_bytes(unsafe { received_bytes(status) });
        if self.body.fields & mpi_fields::PEER == 0 {
            self.peer(source);
            self.tag(tag);
        }
        self.flow_in(message_key(c, source, c.rank, tag, false));
    }

    /// The call received the message with key `key`.
    pub fn flow_in(&mut self, key: u64) {
        if self.body.fields & mpi_fields::FLOW_IN == 0 {
            self.body.flow_in = key;
            self.set(mpi_fields::FLOW_IN);
        } else {
            self.more_in.push(key);
        }
    }

    /// Writes the record. The wrapper calls it after the library returned,
    /// with the program's `errno` kept.
    pub fn emit(mut self) {
        let comm = self.comm.take();
        let id = comm.map_or(&b""[..], |c| c.id.as_bytes());
        let id = &id[..id.len().min(256)];
        self.body.comm_len = id.len() as u16;
        let ticks = self.body.fields & mpi_fields::TICKS != 0;
        let end = if self.end == 0 {
            stamp(ticks)
        } else {
            self.end
        };
        let emit = |bytes: &[u8]| {
            if ticks {
                emit_ticks(self.rt, self.slot, event::MPI_CALL, 0, end, bytes);
            } else {
                emit(self.rt, self.slot, event::MPI_CALL, 0, end, bytes);
            }
        };
        const BODY: usize = std::mem::size_of::<MpiCallBody>();
        if self.more_in.is_empty() {
            // The usual record fits on the stack.
            let mut bytes = [0u8; BODY + 256];
            bytes[..BODY].copy_from_slice(as_bytes(&self.body));
            bytes[BODY..BODY + id.len()].copy_from_slice(id);
            emit(&bytes[..BODY + id.len()]);
            return;
        }
        let mut bytes = Vec::with_capacity(BODY + id.len() + 8 * self.more_in.len());
        bytes.extend_from_slice(as_bytes(&self.body));
        bytes.extend_from_slice(id);
        for k in &self.more_in {
            bytes.extend_from_slice(&k.to_le_bytes());
        }
        emit(&bytes);
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        let _ = DEPTH.try_with(|d| d.set(0));
    }
}

/// Remembers that request `request` (just written by an `MPI_Irecv`) will
/// complete a receive on `c`.
fn receive_pending(request: Handle, c: &'static CommInfo) {
    let mut pending = lock(&PENDING);
    if pending.len() < MAX_PENDING {
        pending.insert(abi().handle(request), c);
        PENDING_COUNT.store(pending.len(), Ordering::Release);
    }
}

/// Which of `requests` are receives still pending (their communicators),
/// in order.
fn pending_receives(requests: &[Handle]) -> Vec<Option<&'static CommInfo>> {
    if PENDING_COUNT.load(Ordering::Acquire) == 0 {
        return vec![None; requests.len()];
    }
    let pending = lock(&PENDING);
    let a = abi();
    requests
        .iter()
        .map(|r| pending.get(&a.handle(*r)).copied())
        .collect()
}

/// Request `request` completed: forget it.
fn completed(request: Handle) {
    if PENDING_COUNT.load(Ordering::Acquire) == 0 {
        return;
    }
    let mut pending = lock(&PENDING);
    pending.remove(&abi().handle(request));
    PENDING_COUNT.store(pending.len(), Ordering::Release);
}

/// Reads `n` request handles from the program's array, when some receive
/// is pending (otherwise none: nothing to look up).
///
/// # Safety
/// `array` points to `n` readable handles (or `n` is 0).
unsafe fn read_requests(array: *const u8, n: c_int) -> Vec<Handle> {
    if PENDING_COUNT.load(Ordering::Acquire) == 0 {
        return Vec::new();
    }
    let a = abi();
    let n = usize::try_from(n).unwrap_or(0);
    if array.is_null() {
        return Vec::new();
    }
    (0..n)
        // SAFETY: contract: element i is readable.
        .map(|i| unsafe { a.read_handle(array.add(i * a.handle_bytes())) })
        .collect()
}

/// Statuses for `n` requests: the program's array, or a private one when
/// it asked to ignore them (and some pending receive needs reading).
struct Statuses {
    own: Vec<u8>,
    theirs: *mut u8,
}

impl Statuses {
    fn new(theirs: *mut u8, n: usize, needed: bool) -> Statuses {
        let a = abi();
        if a.ignored(theirs) && needed {
            Statuses {
                own: vec![0; n.max(1) * a.status_bytes],
                theirs,
            }
        } else {
            Statuses {
                own: Vec::new(),
                theirs,
            }
        }
    }

    /// The pointer to give the library.
    fn pointer(&mut self) -> *mut u8 {
        if self.own.is_empty() {
            self.theirs
        } else {
            self.own.as_mut_ptr()
        }
    }

    /// Status `i`, when one was filled in.
    fn get(&mut self, i: usize) -> Option<*const u8> {
        let p = self.pointer();
        (!abi().ignored(p)).then(|| p.wrapping_add(i * abi().status_bytes) as *const u8)
    }
}

/// What a completion call (`MPI_Wait*`, `MPI_Test*`) needs from before it
/// runs: its requests (read only when some receive is pending: the call
/// overwrites them), which of them complete receives, and the statuses to
/// give the library.
pub struct Waiting {
    requests: Vec<Handle>,
    pending: Vec<Option<&'static CommInfo>>,
    statuses: Statuses,
}

impl Waiting {
    /// `n` requests at `array`; `theirs`: the program's status (`one`) or
    /// array of `n` statuses.
    ///
    /// # Safety
    /// `array` points to `n` readable request handles.
    pub unsafe fn new(array: *const u8, n: c_int, theirs: *mut u8, one: bool) -> Waiting {
        // SAFETY: contract.
        let requests = unsafe { read_requests(array, n) };
        let pending = pending_receives(&requests);
        let slots = if one { 1 } else { requests.len() };
        let statuses = Statuses::new(theirs, slots, pending.iter().any(Option::is_some));
        Waiting {
            requests,
            pending,
            statuses,
        }
    }

    /// The statuses to give the library.
    pub fn statuses(&mut self) -> *mut u8 {
        self.statuses.pointer()
    }

    /// The call completed every request (statuses by request index).
    pub fn all_done(&mut self, call: &mut Call) {
        self.done(call, 0..self.requests.len(), false);
    }

    /// Records the receives among the requests that the call completed:
    /// `done` lists their indices, the statuses follow `done`'s order
    /// when `by_done`, else the requests'.
    pub fn done(&mut self, call: &mut Call, done: impl Iterator<Item = usize>, by_done: bool) {
        for (k, i) in done.enumerate() {
            let Some(&request) = self.requests.get(i) else {
                continue;
            };
            completed(request);
            let (Some(Some(c)), Some(status)) = (
                self.pending.get(i),
                self.statuses.get(if by_done { k } else { i }),
            ) else {
                continue;
            };
            if call.comm.is_none() {
                call.body.comm_size = c.size;
                call.comm = Some(*c);
            }
            // SAFETY: the library filled this status for a completed
            // request.
            unsafe { call.received(c, status) };
        }
    }
}

/// Window `w` (just created) belongs to communicator `c`.
fn window_made(w: Handle, c: &'static CommInfo) {
    lock(&WINDOWS).insert(abi().handle(w), c);
}

fn window_freed(w: Handle) {
    lock(&WINDOWS).remove(&abi().handle(w));
}

/// The `errno` of the library call survives what the wrapper does after.
fn keeping_errno(f: impl FnOnce()) {
    // SAFETY: the calling thread's errno location is always valid.
    let saved = unsafe { *libc::__errno_location() };
    f();
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::testing::{events, runtime, small, SMALL};
    use strobe_wire::config::RuntimeConfig;
    use strobe_wire::record::{event_flags, read};

    #[test]
    fn every_recorded_function_is_found_by_its_name() {
        for (i, name) in MPI_FUNCTIONS.iter().enumerate() {
            assert_eq!(usize::from(function(name)), i, "{name}");
        }
        assert_eq!(MPI_FUNCTIONS[usize::from(function("MPI_Send"))], "MPI_Send");
    }

    /// A communicator of its own for each test (message counters are
    /// process-wide, by communicator).
    fn communicator(id: &str, rank: i32) -> &'static CommInfo {
        info(id.to_string(), 4, rank)
    }

    #[test]
    fn both_ends_of_a_message_compute_the_same_key() {
        let sender = communicator("test.keys@0", 0);
        let receiver = communicator("test.keys@0", 1);
        let sent: Vec<u64> = (0..3).map(|_| message_key(sender, 0, 1, 7, true)).collect();
        let received: Vec<u64> = (0..3)
            .map(|_| message_key(receiver, 0, 1, 7, false))
            .collect();
        assert_eq!(sent, received, "the n-th message has one key");
        assert_ne!(sent[0], sent[1]);
        assert_ne!(sent[1], sent[2]);
        for k in &sent {
            assert!((1..1 << 63).contains(k), "{k}");
        }
        // Another tag, direction or communicator: another sequence.
        let other_tag = message_key(sender, 0, 1, 8, true);
        let reverse = message_key(sender, 1, 0, 7, true);
        let other_comm = message_key(communicator("test.keys2@0", 0), 0, 1, 7, true);
        for k in [other_tag, reverse, other_comm] {
            assert!(!sent.contains(&k));
        }
    }

    #[test]
    fn hashes_depend_on_every_word_and_its_place() {
        assert_eq!(hash(&[1, 2, 3]), hash(&[1, 2, 3]));
        assert_ne!(hash(&[1, 2, 3]), hash(&[3, 2, 1]));
        assert_ne!(hash(&[1, 2]), hash(&[1, 2, 0]));
        assert_ne!(text_hash("world"), text_hash("self"));
        assert_eq!(text_hash("world"), hash(&[119, 111, 114, 108, 100]));
    }

    /// A call being recorded on `slot` of `rt`, as `Call::enter` makes it.
    fn call(rt: &'static Runtime, slot: u32, function: u16, ticks: bool) -> Call {
        Call {
            rt,
            slot,
            end: 0,
            body: MpiCallBody {
                begin_ns: 100,
                function,
                fields: if ticks { mpi_fields::TICKS } else { 0 },
                ..Default::default()
            },
            comm: None,
            more_in: Vec::new(),
        }
    }

    #[test]
    fn a_finished_call_is_one_record_with_its_communicator_and_received_keys() {
        let rt = small();
        let slot = rt.segment.claim_slot(1).unwrap();
        let world = communicator("world", 2);
        // As `Call::enter` marks it: no nested call is recorded meanwhile.
        DEPTH.with(|d| d.set(1));
        let mut c = call(rt, slot, function("MPI_Waitall"), false);
        c.comm = Some(world);
        c.body.comm_size = world.size;
        c.recv_bytes(10);
        c.recv_bytes(u64::MAX);
        c.flow_in(11);
        c.flow_in(12);
        c.flow_in(13);
        c.end = 500;
        c.emit();
        let got = events(rt, slot);
        assert_eq!(got.len(), 1);
        let (head, bytes) = &got[0];
        assert_eq!(
            (head.kind, head.flags, head.timestamp_ns),
            (event::MPI_CALL, 0, 500)
        );
        let body = read::<MpiCallBody>(bytes).unwrap();
        assert_eq!(body.function, function("MPI_Waitall"));
        assert_eq!(body.begin_ns, 100);
        assert_eq!(body.recv_bytes, u64::MAX, "saturates");
        assert_eq!(body.fields, mpi_fields::RECV_BYTES | mpi_fields::FLOW_IN);
        assert_eq!((body.flow_in, body.comm_size), (11, 4));
        assert_eq!(body.comm_len, 5);
        let rest = &bytes[std::mem::size_of::<MpiCallBody>()..];
        assert_eq!(&rest[..5], b"world");
        let more: Vec<u64> = rest[5..]
            .chunks_exact(8)
            .map(|k| u64::from_le_bytes(k.try_into().unwrap()))
            .collect();
        assert_eq!(more, [12, 13]);
        assert_eq!(DEPTH.with(Cell::get), 0, "recording ends with the call");
    }

    #[test]
    fn a_long_communicator_id_is_cut_and_a_call_in_ticks_stays_in_ticks() {
        let rt = runtime(RuntimeConfig {
            layout: SMALL,
            tsc: true,
            ..RuntimeConfig::default()
        });
        let slot = rt.segment.claim_slot(1).unwrap();
        let long = communicator(&"c".repeat(300), 0);
        let mut c = call(rt, slot, function("MPI_Barrier"), true);
        c.comm = Some(long);
        c.end = 7_000;
        c.emit();
        let (head, bytes) = events(rt, slot).remove(0);
        assert_eq!((head.flags, head.timestamp_ns), (event_flags::TSC, 7_000));
        let body = read::<MpiCallBody>(&bytes).unwrap();
        assert_eq!(body.fields, mpi_fields::TICKS);
        assert_eq!(body.comm_len, 256);
        assert_eq!(bytes.len(), std::mem::size_of::<MpiCallBody>() + 256);
    }

    #[test]
    fn a_calls_fields_are_set_only_for_what_it_said() {
        let rt = small();
        let slot = rt.segment.claim_slot(1).unwrap();
        let mut c = call(rt, slot, function("MPI_Recv"), false);
        // A wildcard tag is no tag.
        c.tag(abi().any_tag);
        assert_eq!(c.body.fields & mpi_fields::TAG, 0);
        c.tag(9);
        c.peer(3);
        c.root(0);
        c.bytes(5);
        c.bytes(6);
        assert_eq!(
            c.body.fields,
            mpi_fields::TAG | mpi_fields::PEER | mpi_fields::ROOT | mpi_fields::BYTES
        );
        assert_eq!(
            (c.body.tag, c.body.peer, c.body.root, c.body.bytes),
            (9, 3, 0, 11)
        );
        // No end recorded: stamped as it is written.
        let before = now_ns();
        c.emit();
        let (head, bytes) = events(rt, slot).remove(0);
        assert!(head.timestamp_ns >= before);
        assert_eq!(read::<MpiCallBody>(&bytes).unwrap().comm_len, 0);
        assert_eq!(bytes.len(), std::mem::size_of::<MpiCallBody>());
    }
}
