//! Buffers: seed 001's size, watermark and policy, with per-thread shards so
//! producers never share a written cache line.
//!
//! Owns record emplacement (the producer hot path), the lossless and discard
//! policies, the bounded lossless wait, explicit flush, delivery of full
//! blocks to the callback (on the buffer's callback thread) and the buffer's
//! statistics.
//!
//! **Hot path.** `emplace` reads the thread's index (a const thread-local),
//! takes its shard's block with one atomic swap, copies the record, and puts
//! the block back with one release store. It never allocates, never takes a
//! lock and never formats. Only when a block reaches the watermark or is
//! full does the producer hand it to the ready queue (lock-free) and take an
//! empty one from the free pool (lock-free); under the lossless policy, when
//! no empty block exists, the producer waits — spinning, then yielding, then
//! sleeping — for at most the buffer's `lossless_wait`, and the wait is
//! counted in [`BufferStats`].
//!
//! **Shards.** A buffer has [`SHARDS`] slots, one cache line pair each;
//! thread *i* writes through slot *i mod SHARDS*. Each slot holds the
//! thread's active block, the marker "no block yet", or a "busy" tag naming
//! the thread that holds the block right now. Two threads share a slot only
//! when more than [`SHARDS`] threads write to one buffer; they then take
//! turns. A signal handler that interrupts an emplace on the same buffer
//! finds its own busy tag and drops its record (counted) instead of
//! deadlocking.
//!
//! **Watermark.** Counted per block, in payload bytes rounded up to 8: after
//! a record is placed, a block whose used bytes reach the watermark is
//! delivered. With one producer thread this is exactly seed 001's rule.

use crate::block::{footprint, tag, Block};
use crate::callback_thread::{self, CallbackThread};
use crate::error::{Error, Result};
use crate::handoff::{FreePool, NonNullBlock, ReadyQueue};
use crate::ids::{BufferId, ContextId};
use crate::record::{RecordHeader, MAX_RECORD_SIZE};
use crate::registry::Registry;
use crate::thread_index;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// Shard slots per buffer (threads beyond this share slots).
pub const SHARDS: usize = 64;
/// Blocks a buffer owns unless [`BufferOptions::blocks`] says otherwise.
pub const DEFAULT_BLOCKS: usize = 4;
/// Most blocks one buffer may own.
pub const MAX_BLOCKS: usize = 1024;
/// Default bound of the lossless wait.
pub const DEFAULT_LOSSLESS_WAIT: Duration = Duration::from_secs(2);
/// Most buffers a process may create.
pub const MAX_BUFFERS: usize = 4096;

const EMPTY: usize = 0;

pub use crate::page::{page_size, round_to_page};

/// What happens when a record does not fit in the producer's block.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// The full block is delivered and an empty one takes its place; the
    /// producer never loses a record. When every block is in use it waits
    /// (bounded by [`BufferOptions::lossless_wait`]).
    Lossless = 1,
    /// Records that do not fit are dropped until a flush or a watermark
    /// delivery empties the block; the number dropped reaches the next
    /// callback as `drop_count`. Producers never wait.
    Discard = 2,
}

impl Policy {
    /// The policy with this C value (`STROBE_BUFFER_POLICY_*`).
    pub fn from_u32(v: u32) -> Option<Policy> {
        match v {
            1 => Some(Policy::Lossless),
            2 => Some(Policy::Discard),
            _ => None,
        }
    }
}

/// How a buffer is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferOptions {
    /// Block size in bytes, rounded up to the page size. Each producer
    /// thread fills its own block of this size.
    pub size: usize,
    /// Bytes after which a block is delivered (0 = every record; values
    /// above the size act as the size).
    pub watermark: usize,
    /// Lossless or discard.
    pub policy: Policy,
    /// How many blocks the buffer owns (memory = blocks × 2 × size; at
    /// least 1, at most [`MAX_BLOCKS`]). More blocks absorb longer callback
    /// stalls and more concurrent producer threads.
    pub blocks: usize,
    /// The longest a lossless producer waits for an empty block before it
    /// drops the record (counted, reported as `drop_count`, warned once).
    pub lossless_wait: Duration,
    /// The callback thread to start on (`None`: the shared default thread,
    /// started on first use). Choosing one here never touches the default
    /// thread, which matters in a forked child where it does not exist.
    pub callback_thread: Option<CallbackThread>,
}

impl BufferOptions {
    /// Options with the given size, watermark and policy and default block
    /// count and lossless wait.
    pub fn new(size: usize, watermark: usize, policy: Policy) -> BufferOptions {
        BufferOptions {
            size,
            watermark,
            policy,
            blocks: DEFAULT_BLOCKS,
            lossless_wait: DEFAULT_LOSSLESS_WAIT,
            callback_thread: None,
        }
    }

    /// Starts the buffer on this callback thread instead of the default one.
    pub fn on_callback_thread(mut self, thread: CallbackThread) -> BufferOptions {
        self.callback_thread = Some(thread);
        self
    }

    /// Sets the number of blocks.
    pub fn blocks(mut self, blocks: usize) -> BufferOptions {
        self.blocks = blocks;
        self
    }

    /// Sets the lossless wait bound.
    pub fn lossless_wait(mut self, wait: Duration) -> BufferOptions {
        self.lossless_wait = wait;
        self
    }
}

/// What a Rust buffer callback receives: seed 001's callback arguments.
#[derive(Debug)]
pub struct Delivery<'a> {
    /// The context the buffer belongs to.
    pub context: u64,
    /// The buffer.
    pub buffer: u64,
    /// The records, in the order they were placed (per producer thread).
    pub records: &'a [RecordHeader],
    /// Records dropped since the previous callback of this buffer.
    pub drop_count: u64,
}

/// `strobe_buffer_callback_t`: receives a batch of records; a non-zero
/// return is reported as a callback failure and delivery goes on.
pub type CBufferCallback = unsafe extern "C" fn(
    context: ContextId,
    buffer: BufferId,
    headers: *const RecordHeader,
    num_headers: usize,
    callback_data: *mut c_void,
    drop_count: u64,
) -> i32;

/// A Rust buffer callback. Runs on the buffer's callback thread; a panic is
/// caught, reported on stderr and counted, and delivery goes on.
pub type BufferCallback = Box<dyn FnMut(&Delivery<'_>) + Send + 'static>;

pub(crate) enum Callback {
    Rust(BufferCallback),
    C {
        func: CBufferCallback,
        data: *mut c_void,
    },
}

// SAFETY: the C callback's user data is handed to the callback thread by the
// tool's own contract (seed 001: the callback runs on a background thread).
unsafe impl Send for Callback {}

/// Whether a record was stored or dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Emplace {
    /// The record is in the buffer.
    Stored,
    /// The record was dropped and counted (discard policy, a record larger
    /// than the buffer, a lossless wait that hit its bound, or a re-entrant
    /// emplace from a signal handler).
    Dropped,
}

/// Counters describing a buffer's life. Updated only off the hot path.
/// Layout is C `strobe_buffer_stats_t` (nine `uint64_t`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BufferStats {
    /// Records handed to the callback.
    pub records_delivered: u64,
    /// Callback invocations.
    pub callbacks: u64,
    /// Records dropped (all reasons).
    pub records_dropped: u64,
    /// Records dropped because they are larger than the buffer.
    pub records_too_large: u64,
    /// Times a lossless producer found no empty block and waited.
    pub lossless_waits: u64,
    /// Total nanoseconds producers spent in those waits.
    pub lossless_wait_ns: u64,
    /// Waits that hit the bound (each dropped one record).
    pub lossless_wait_timeouts: u64,
    /// Callbacks that panicked (Rust) or returned non-zero (C).
    pub callback_failures: u64,
    /// Explicit flushes completed.
    pub flushes: u64,
}

#[derive(Default)]
struct StatCounters {
    records_delivered: AtomicU64,
    callbacks: AtomicU64,
    records_dropped: AtomicU64,
    records_too_large: AtomicU64,
    lossless_waits: AtomicU64,
    lossless_wait_ns: AtomicU64,
    lossless_wait_timeouts: AtomicU64,
    callback_failures: AtomicU64,
    flushes: AtomicU64,
}

#[repr(align(128))]
struct Shard(AtomicUsize);

/// A value alone on its cache lines (128 bytes: a line and its adjacent-line
/// prefetch partner), so that what the callback thread and slow paths write
/// never shares a line with what every producer reads.
#[repr(align(128))]
struct Line<T>(T);

impl<T> std::ops::Deref for Line<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

pub(crate) struct BufferInner {
    pub(crate) id: u64,
    pub(crate) context: u64,
    capacity: usize,
    watermark: usize,
    policy: Policy,
    lossless_wait_ns: u64,
    shards: Box<[Shard]>,
    pool: FreePool,
    ready: ReadyQueue,
    pub(crate) callback_thread: AtomicU64,
    callback: Line<Mutex<Callback>>,
    delivering: Line<AtomicBool>,
    pending_drops: Line<AtomicU64>,
    flush_requested: Line<AtomicU64>,
    flush_completed: Line<Mutex<u64>>,
    flush_cv: Condvar,
    warned_timeout: AtomicBool,
    /// Set when a lossless wait hit its bound; cleared when a callback
    /// completes. While set, producers drop at once instead of waiting.
    stalled: Line<AtomicBool>,
    warnings_left: AtomicU64,
    stats: Line<StatCounters>,
}

pub(crate) static BUFFERS: Registry<BufferInner, MAX_BUFFERS> = Registry::new();

/// A handle to a buffer. Buffers live until the process exits.
#[derive(Clone, Copy)]
pub struct Buffer {
    pub(crate) inner: &'static BufferInner,
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffer")
            .field("id", &self.inner.id)
            .field("context", &self.inner.context)
            .field("size", &self.inner.capacity)
            .field("watermark", &self.inner.watermark)
            .field("policy", &self.inner.policy)
            .finish()
    }
}

impl Buffer {
    /// The buffer's id (non-zero).
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// The context the buffer was created in.
    pub fn context_id(&self) -> u64 {
        self.inner.context
    }

    /// The block size after page rounding.
    pub fn size(&self) -> usize {
        self.inner.capacity
    }

    /// The effective watermark.
    pub fn watermark(&self) -> usize {
        self.inner.watermark
    }

    /// The policy.
    pub fn policy(&self) -> Policy {
        self.inner.policy
    }

    /// The callback thread that runs this buffer's callback.
    pub fn callback_thread(&self) -> u64 {
        self.inner.callback_thread.load(Ordering::Acquire)
    }

    /// Places a typed record directly in this buffer (bypassing contexts
    /// and services). Never allocates or locks; see the module docs.
    #[inline]
    pub fn emplace<T: crate::record::Payload>(&self, operation: u32, payload: &T) -> Emplace {
        self.inner.emplace(
            T::KIND.category() as u32,
            T::KIND as u32,
            operation,
            payload.as_bytes(),
            &[],
        )
    }

    /// Places a record made of `head` followed by `tail` with an explicit
    /// header (for variable-length records and foreign producers).
    #[inline]
    pub fn emplace_bytes(
        &self,
        category: u32,
        kind: u32,
        operation: u32,
        head: &[u8],
        tail: &[u8],
    ) -> Emplace {
        self.inner.emplace(category, kind, operation, head, tail)
    }

    /// Delivers every record emplaced before this call and any pending drop
    /// count, and returns after the callback has run (seed 001's
    /// `flush_buffer`). Not for signal handlers. Errors when called on the
    /// buffer's own callback thread (it would wait for itself).
    pub fn flush(&self) -> Result<()> {
        self.inner.flush()
    }

    /// A snapshot of the buffer's counters.
    pub fn stats(&self) -> BufferStats {
        self.inner.stats()
    }
}

/// The block size of a buffer built with `options`: the size rounded up
/// to the page size. Errors: size 0, blocks outside `1..=MAX_BLOCKS`, a
/// size above 4 GiB.
pub(crate) fn checked_capacity(options: &BufferOptions) -> Result<usize> {
    if options.size == 0 {
        return Err(Error::InvalidArgument(
            "buffer size is 0: give the size in bytes (it is rounded up to the page size)".into(),
        ));
    }
    if options.blocks == 0 || options.blocks > MAX_BLOCKS {
        return Err(Error::InvalidArgument(format!(
            "buffer blocks = {}: use 1..={MAX_BLOCKS}",
            options.blocks
        )));
    }
    let capacity = round_to_page(options.size);
    if capacity > (u32::MAX as usize) {
        return Err(Error::InvalidArgument(format!(
            "buffer size {} is above the 4 GiB limit",
            options.size
        )));
    }
    Ok(capacity)
}

/// Allocates the blocks of a buffer of `context` (`capacity` from
/// [`checked_capacity`]) and registers it, its callbacks to run on
/// callback thread `thread`. Errors: out of memory, too many buffers.
pub(crate) fn register(
    context: u64,
    capacity: usize,
    thread: u64,
    options: &BufferOptions,
    callback: Callback,
) -> Result<Buffer> {
    let mut blocks = Vec::with_capacity(options.blocks);
    for _ in 0..options.blocks {
        blocks.push(Block::new(capacity).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "out of memory allocating {} blocks of {capacity} bytes",
                options.blocks
            ))
        })?);
    }
    let made = BUFFERS.insert_with(|id| {
        Ok::<_, Error>(BufferInner {
            id,
            context,
            capacity,
            watermark: options.watermark.min(capacity),
            policy: options.policy,
            lossless_wait_ns: options.lossless_wait.as_nanos().min(u64::MAX as u128) as u64,
            shards: (0..SHARDS)
                .map(|_| Shard(AtomicUsize::new(EMPTY)))
                .collect(),
            ready: ReadyQueue::new(options.blocks),
            pool: FreePool::new(blocks),
            callback_thread: AtomicU64::new(thread),
            callback: Line(Mutex::new(callback)),
            delivering: Line(AtomicBool::new(false)),
            pending_drops: Line(AtomicU64::new(0)),
            flush_requested: Line(AtomicU64::new(0)),
            flush_completed: Line(Mutex::new(0)),
            flush_cv: Condvar::new(),
            warned_timeout: AtomicBool::new(false),
            stalled: Line(AtomicBool::new(false)),
            warnings_left: AtomicU64::new(10),
            stats: Line(StatCounters::default()),
        })
    });
    match made {
        Some(Ok(inner)) => Ok(Buffer { inner }),
        Some(Err(e)) => Err(e),
        None => Err(Error::LimitReached {
            what: "buffers",
            limit: MAX_BUFFERS,
        }),
    }
}

pub(crate) fn lookup(id: u64) -> Result<Buffer> {
    BUFFERS
        .get(id)
        .map(|inner| Buffer { inner })
        .ok_or(Error::UnknownBuffer(id))
}

/// Backs off while waiting: spin, then yield, then sleep with exponential
/// steps from 16 µs to 1 ms (so many waiting producers do not starve the
/// callback thread of CPU time).
#[inline(never)]
fn backoff(step: &mut u32) {
    if *step < 32 {
        std::hint::spin_loop();
    } else if *step < 48 {
        std::thread::yield_now();
    } else {
        let exp = ((*step - 48) / 4).min(6);
        std::thread::sleep(Duration::from_micros(16 << exp));
    }
    *step = step.saturating_add(1);
}

impl BufferInner {
    /// The producer hot path; see the module docs.
    #[inline]
    pub(crate) fn emplace(
        &self,
        category: u32,
        kind: u32,
        operation: u32,
        head: &[u8],
        tail: &[u8],
    ) -> Emplace {
        let size = head.len() + tail.len();
        let fp = footprint(size);
        if fp > self.capacity || size > MAX_RECORD_SIZE {
            self.stats.records_too_large.fetch_add(1, Ordering::Relaxed);
            return self.drop_record();
        }
        let me = thread_index::current() as usize;
        let shard = &self.shards[me % SHARDS].0;
        let busy = (me << 1) | 1;
        let previous = shard.swap(busy, Ordering::Acquire);
        let mut block = if previous & 1 == 0 {
            previous
        } else {
            match self.wait_for_shard(shard, busy, previous) {
                Some(b) => b,
                None => return self.drop_record(),
            }
        };
        let tag = tag(category, kind, operation, size);
        loop {
            if block == EMPTY {
                match self.acquire_block(me) {
                    Some(b) => block = b.as_ptr() as usize,
                    None => {
                        shard.store(EMPTY, Ordering::Release);
                        return self.drop_record();
                    }
                }
            }
            // SAFETY: `block` came out of our shard slot (or the pool) in
            // exchange for our busy tag, so this thread owns it until the
            // store below hands it back.
            let b = unsafe { &mut *(block as *mut Block) };
            if b.fits(fp) {
                b.push(tag, head, tail);
                if b.used() >= self.watermark {
                    self.submit(block);
                    block = EMPTY;
                }
                shard.store(block, Ordering::Release);
                return Emplace::Stored;
            }
            match self.policy {
                Policy::Lossless => {
                    self.submit(block);
                    block = EMPTY;
                }
                Policy::Discard => {
                    shard.store(block, Ordering::Release);
                    return self.drop_record();
                }
            }
        }
    }

    #[cold]
    fn drop_record(&self) -> Emplace {
        self.pending_drops.fetch_add(1, Ordering::Relaxed);
        self.stats.records_dropped.fetch_add(1, Ordering::Relaxed);
        Emplace::Dropped
    }

    /// Slow path: our shard is held by another thread (more threads than
    /// shards, or a flush). Returns the slot's value once we own it, or
    /// `None` for a re-entrant call or when the wait hits its bound.
    #[cold]
    #[inline(never)]
    fn wait_for_shard(&self, shard: &AtomicUsize, busy: usize, previous: usize) -> Option<usize> {
        if previous == busy {
            // A signal handler interrupted this thread inside an emplace on
            // this buffer: the interrupted frame holds the block.
            return None;
        }
        let start = strobe_core::clock::now_ns();
        let mut step = 0;
        loop {
            let v = shard.load(Ordering::Acquire);
            if v & 1 == 0 {
                if shard
                    .compare_exchange(v, busy, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    return Some(v);
                }
                continue;
            }
            if step > 128
                && strobe_core::clock::now_ns().saturating_sub(start) > self.lossless_wait_ns
            {
                // We overwrote the other holder's tag with ours at the
                // first swap; it restores its block with a plain store, so
                // leaving now loses nothing.
                self.note_timeout();
                return None;
            }
            backoff(&mut step);
        }
    }

    /// Slow path: takes an empty block from the pool; under the lossless
    /// policy waits (bounded, counted) until one is free.
    #[cold]
    #[inline(never)]
    fn acquire_block(&self, me: usize) -> Option<NonNullBlock> {
        if let Some(b) = self.pool.pop(me) {
            return Some(b);
        }
        if let Some(b) = self.steal(me) {
            return Some(b);
        }
        if self.policy == Policy::Discard {
            return None;
        }
        self.wake();
        if self.stalled.load(Ordering::Relaxed) {
            // A wait already hit its bound and no callback has completed
            // since: the consumer is stuck; do not stall the program again.
            self.stats
                .lossless_wait_timeouts
                .fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let start = strobe_core::clock::now_ns();
        let mut step = 0;
        let result = loop {
            if let Some(b) = self.pool.pop(me) {
                break Some(b);
            }
            if let Some(b) = self.steal(me) {
                break Some(b);
            }
            let waited = strobe_core::clock::now_ns().saturating_sub(start);
            if waited > self.lossless_wait_ns {
                self.stalled.store(true, Ordering::Relaxed);
                self.note_timeout();
                break None;
            }
            backoff(&mut step);
        };
        let waited = strobe_core::clock::now_ns().saturating_sub(start);
        self.stats.lossless_waits.fetch_add(1, Ordering::Relaxed);
        self.stats
            .lossless_wait_ns
            .fetch_add(waited, Ordering::Relaxed);
        result
    }

    /// Takes blocks parked in other threads' shards when the pool is empty
    /// (threads that wrote a little and went idle). An empty block is
    /// returned for use; a non-empty one is submitted for delivery, after
    /// which its memory returns to the pool.
    #[cold]
    fn steal(&self, me: usize) -> Option<NonNullBlock> {
        let mine = me % SHARDS;
        let busy = (me << 1) | 1;
        for (i, shard) in self.shards.iter().enumerate() {
            if i == mine {
                continue;
            }
            let v = shard.0.load(Ordering::Acquire);
            if v == EMPTY || v & 1 == 1 {
                continue;
            }
            // Our busy tag stays in the slot until the block is in the ready
            // queue, so a concurrent flush waits for it instead of missing it.
            if shard
                .0
                .compare_exchange(v, busy, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            let Some(b) = NonNullBlock::new(v as *mut Block) else {
                shard.0.store(EMPTY, Ordering::Release);
                continue;
            };
            // SAFETY: the CAS took the block out of the slot: we own it.
            if unsafe { b.get() }.count() == 0 {
                shard.0.store(EMPTY, Ordering::Release);
                return Some(b);
            }
            self.submit(v);
            shard.0.store(EMPTY, Ordering::Release);
        }
        None
    }

    #[cold]
    fn note_timeout(&self) {
        self.stats
            .lossless_wait_timeouts
            .fetch_add(1, Ordering::Relaxed);
        if !self.warned_timeout.swap(true, Ordering::Relaxed) {
            crate::warn::write_raw(
                b"strobe: warning: a lossless buffer's producer waited longer than its bound \
                  for an empty block (is a buffer callback stuck?); the record was dropped and \
                  is reported as drop_count (further timeouts are only counted)\n",
            );
        }
    }

    /// Hands a block (non-empty) to the callback thread.
    #[inline]
    fn submit(&self, block: usize) {
        if let Some(b) = NonNullBlock::new(block as *mut Block) {
            self.ready.push(b);
            self.wake();
        }
    }

    #[inline]
    fn wake(&self) {
        callback_thread::wake(self.callback_thread.load(Ordering::Relaxed));
    }

    pub(crate) fn flush(&self) -> Result<()> {
        let thread = self.callback_thread.load(Ordering::Acquire);
        if callback_thread::current_thread_id() == thread {
            return Err(Error::FlushOnDeliveryThread(self.id));
        }
        let busy = ((thread_index::current() as usize) << 1) | 1;
        for shard in self.shards.iter() {
            let mut step = 0;
            let taken = loop {
                let v = shard.0.load(Ordering::Acquire);
                if v & 1 == 1 {
                    // A producer, stealer or other flush holds the slot (their
                    // holds are short or bounded).
                    backoff(&mut step);
                    continue;
                }
                if v == EMPTY {
                    break EMPTY;
                }
                // Hold the slot with our busy tag until the block is queued,
                // so a concurrent flush cannot slip past it.
                if shard
                    .0
                    .compare_exchange(v, busy, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    break v;
                }
            };
            if let Some(b) = NonNullBlock::new(taken as *mut Block) {
                // SAFETY: the CAS took the block out of the slot: we own it.
                if unsafe { b.get() }.count() == 0 {
                    self.pool.push(b);
                } else {
                    self.ready.push(b);
                }
                shard.0.store(EMPTY, Ordering::Release);
            }
        }
        let ticket = self.flush_requested.fetch_add(1, Ordering::AcqRel) + 1;
        let mut done = self
            .flush_completed
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        while *done < ticket {
            callback_thread::wake(self.callback_thread.load(Ordering::Acquire));
            let (guard, _) = self
                .flush_cv
                .wait_timeout(done, Duration::from_millis(20))
                .unwrap_or_else(|e| e.into_inner());
            done = guard;
        }
        drop(done);
        self.stats.flushes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Runs on the callback thread: delivers queued blocks and answers
    /// flush requests. Returns whether it did anything.
    pub(crate) fn deliver_pending(&self, scratch: &mut Vec<RecordHeader>) -> bool {
        if self.delivering.swap(true, Ordering::Acquire) {
            return false;
        }
        let requested = self.flush_requested.load(Ordering::Acquire);
        let mut worked = false;
        while let Some(b) = self.ready.pop() {
            // SAFETY: popped from the ready queue: this thread owns it.
            let block = unsafe { b.get() };
            block.headers(scratch);
            let drops = self.pending_drops.swap(0, Ordering::AcqRel);
            self.invoke(scratch, drops);
            block.reset();
            self.pool.push(b);
            worked = true;
        }
        let completed = *self
            .flush_completed
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if requested > completed {
            let drops = self.pending_drops.swap(0, Ordering::AcqRel);
            if drops > 0 {
                scratch.clear();
                self.invoke(scratch, drops);
            }
            let mut done = self
                .flush_completed
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            *done = requested;
            drop(done);
            self.flush_cv.notify_all();
            worked = true;
        }
        self.delivering.store(false, Ordering::Release);
        worked
    }

    fn invoke(&self, records: &[RecordHeader], drop_count: u64) {
        let mut callback = self.callback.lock().unwrap_or_else(|e| e.into_inner());
        let context = self.context;
        let buffer = self.id;
        let outcome = catch_unwind(AssertUnwindSafe(|| match &mut *callback {
            Callback::Rust(f) => {
                f(&Delivery {
                    context,
                    buffer,
                    records,
                    drop_count,
                });
                0
            }
            // SAFETY: a C tool registered this function with this data and
            // promised the signature of `strobe_buffer_callback_t`; the
            // headers array is valid for `records.len()` entries during the
            // call.
            Callback::C { func, data } => unsafe {
                func(
                    ContextId { handle: context },
                    BufferId { handle: buffer },
                    records.as_ptr(),
                    records.len(),
                    *data,
                    drop_count,
                )
            },
        }));
        drop(callback);
        if self.stalled.load(Ordering::Relaxed) {
            self.stalled.store(false, Ordering::Relaxed);
        }
        self.stats.callbacks.fetch_add(1, Ordering::Relaxed);
        self.stats
            .records_delivered
            .fetch_add(records.len() as u64, Ordering::Relaxed);
        let failure = match outcome {
            Ok(0) => None,
            Ok(code) => Some(format!("returned error status {code}")),
            Err(panic) => Some(format!("panicked: {}", crate::warn::panic_message(&panic))),
        };
        if let Some(what) = failure {
            self.stats.callback_failures.fetch_add(1, Ordering::Relaxed);
            let left = self.warnings_left.load(Ordering::Relaxed);
            if left > 0 {
                self.warnings_left.store(left - 1, Ordering::Relaxed);
                eprintln!(
                    "strobe: warning: the callback of buffer {} (context {}) {what} while \
                     receiving {} records; delivery goes on{}",
                    self.id,
                    self.context,
                    records.len(),
                    if left == 1 {
                        " (further callback failures are only counted)"
                    } else {
                        ""
                    }
                );
            }
        }
    }

    fn stats(&self) -> BufferStats {
        let s = &*self.stats;
        BufferStats {
            records_delivered: s.records_delivered.load(Ordering::Relaxed),
            callbacks: s.callbacks.load(Ordering::Relaxed),
            records_dropped: s.records_dropped.load(Ordering::Relaxed),
            records_too_large: s.records_too_large.load(Ordering::Relaxed),
            lossless_waits: s.lossless_waits.load(Ordering::Relaxed),
            lossless_wait_ns: s.lossless_wait_ns.load(Ordering::Relaxed),
            lossless_wait_timeouts: s.lossless_wait_timeouts.load(Ordering::Relaxed),
            callback_failures: s.callback_failures.load(Ordering::Relaxed),
            flushes: s.flushes.load(Ordering::Relaxed),
        }
    }
}

/// Flushes every buffer of the process (or of one context when `context`
/// is `Some`). Buffers whose callback thread is the calling thread are
/// skipped. Returns the first error.
pub fn flush_all(context: Option<u64>) -> Result<()> {
    let mut first = Ok(());
    for inner in BUFFERS.iter() {
        if context.is_some_and(|c| c != inner.context) {
            continue;
        }
        if callback_thread::current_thread_id() == inner.callback_thread.load(Ordering::Acquire) {
            continue;
        }
        if let Err(e) = inner.flush() {
            if first.is_ok() {
                first = Err(e);
            }
        }
    }
    first
}
