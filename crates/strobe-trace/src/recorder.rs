//! The recorder: a built-in subscriber that captures every notification as a
//! plain [`TraceRecord`] (timestamp, thread, stream, type, event ids,
//! instance, user data) into a bounded per-thread queue that a consumer
//! drains with [`Recorder::drain`].
//!
//! Owns the per-thread single-producer/single-consumer rings. The producer
//! side (the callback) must never lock or allocate after a thread's first
//! record (which allocates that thread's ring once); a full ring drops the
//! record and counts it. The consumer side locks only the ring list.
//! Never looks up the thread id itself: records carry
//! `strobe_core::thread::gettid()`, which stays right in a forked child.

use std::cell::{RefCell, UnsafeCell};
use std::collections::HashSet;
use std::ffi::CStr;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::callbacks::Notification;
use crate::framework::Framework;
use crate::framework::{StreamInit, Subscriber};
use crate::types::{trace_point, StreamId};

/// One captured notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceRecord {
    /// `strobe_core::clock::now_ns()` when the callback ran.
    pub timestamp_ns: u64,
    /// Kernel thread id of the notifying thread.
    pub thread: u64,
    /// Stream id.
    pub stream: StreamId,
    /// Trace-point type.
    pub trace_type: u16,
    /// Unique id of the event (0 when the notification had none).
    pub event_uid: u64,
    /// Unique id of the parent event (0 when none).
    pub parent_uid: u64,
    /// Instance number passed with the notification.
    pub instance: u64,
    /// The per-instance user-data pointer, as an integer (only valid during
    /// the callback: kept for correlation, never dereferenced).
    pub user_data: usize,
}

#[repr(align(64))]
struct Padded<T>(T);

struct Ring {
    slots: Box<[UnsafeCell<MaybeUninit<TraceRecord>>]>,
    head: Padded<AtomicUsize>,
    tail: Padded<AtomicUsize>,
    dropped: Padded<AtomicU64>,
}

// SAFETY: slots are written only by the owning producer thread at indexes
// in [head + cap, ..) it alone advances, and read only by the consumer (under
// the recorder's drain lock) at indexes below `tail`; Release/Acquire on
// head/tail order the accesses.
unsafe impl Sync for Ring {}
// SAFETY: as above.
unsafe impl Send for Ring {}

impl Ring {
    fn new(capacity: usize) -> Self {
        Ring {
            slots: (0..capacity)
                .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
                .collect(),
            head: Padded(AtomicUsize::new(0)),
            tail: Padded(AtomicUsize::new(0)),
            dropped: Padded(AtomicU64::new(0)),
        }
    }

    fn push(&self, r: TraceRecord) {
        let t = self.tail.0.load(Ordering::Relaxed);
        let h = self.head.0.load(Ordering::Acquire);
        if t.wrapping_sub(h) >= self.slots.len() {
            self.dropped.0.fetch_add(1, Ordering::Relaxed);
            return;
        }
        // SAFETY: slot t is outside [h, t): the consumer does not read it,
        // and only this thread writes slots.
        unsafe { (*self.slots[t % self.slots.len()].get()).write(r) };
        self.tail.0.store(t.wrapping_add(1), Ordering::Release);
    }

    fn drain_into(&self, out: &mut Vec<TraceRecord>) -> usize {
        let mut h = self.head.0.load(Ordering::Relaxed);
        let t = self.tail.0.load(Ordering::Acquire);
        let n = t.wrapping_sub(h);
        while h != t {
            // SAFETY: slots in [h, t) were fully written before `tail` was
            // released; only the (lock-holding) consumer reads them.
            out.push(unsafe { (*self.slots[h % self.slots.len()].get()).assume_init() });
            h = h.wrapping_add(1);
        }
        self.head.0.store(h, Ordering::Release);
        n
    }
}

struct Inner {
    id: u64,
    capacity: usize,
    trace_types: Vec<u16>,
    rings: Mutex<Vec<(u64, Arc<Ring>)>>,
    registered: Mutex<HashSet<(u64, StreamId)>>,
}

static NEXT_RECORDER: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static MY_RINGS: RefCell<Vec<(u64, Arc<Ring>)>> = const { RefCell::new(Vec::new()) };
}

impl Inner {
    fn record(&self, n: &Notification<'_>) {
        let rec = TraceRecord {
            timestamp_ns: strobe_core::clock::now_ns(),
            thread: 0,
            stream: n.stream,
            trace_type: n.trace_type,
            event_uid: n.event.map_or(0, |e| e.unique_id),
            parent_uid: n.parent.map_or(0, |e| e.unique_id),
            instance: n.instance,
            user_data: n.user_data as usize,
        };
        // A thread whose thread-locals are being destroyed drops the record.
        let _ = MY_RINGS.try_with(|rings| {
            let mut rings = rings.borrow_mut();
            let mut rec = rec;
            // Kernel thread ids are positive, so the cast keeps the value.
            rec.thread = strobe_core::thread::gettid() as u64;
            if let Some((_, ring)) = rings.iter().find(|(id, _)| *id == self.id) {
                ring.push(rec);
                return;
            }
            // First record of this thread for this recorder: allocate its ring.
            let ring = Arc::new(Ring::new(self.capacity));
            self.rings
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((rec.thread, ring.clone()));
            ring.push(rec);
            rings.push((self.id, ring));
        });
    }
}

/// The recorder subscriber. Clone it to keep a consumer handle while the
/// framework holds another.
#[derive(Clone)]
pub struct Recorder {
    inner: Arc<Inner>,
}

impl Recorder {
    /// A recorder with `capacity` records per thread, subscribing to every
    /// predefined trace-point type.
    pub fn new(capacity: usize) -> Self {
        Self::with_trace_types(capacity, trace_point::ALL_PREDEFINED.to_vec())
    }

    /// A recorder subscribing to the given trace-point types only (add
    /// user-defined codes here).
    pub fn with_trace_types(capacity: usize, trace_types: Vec<u16>) -> Self {
        Recorder {
            inner: Arc::new(Inner {
                id: NEXT_RECORDER.fetch_add(1, Ordering::Relaxed),
                capacity: capacity.max(1),
                trace_types,
                rings: Mutex::new(Vec::new()),
                registered: Mutex::new(HashSet::new()),
            }),
        }
    }

    /// Moves every queued record into `out` (per thread in order; threads
    /// one after another) and returns how many were moved.
    pub fn drain(&self, out: &mut Vec<TraceRecord>) -> usize {
        let rings = self.inner.rings.lock().unwrap_or_else(|e| e.into_inner());
        rings.iter().map(|(_, r)| r.drain_into(out)).sum()
    }

    /// Records lost because a thread's queue was full.
    pub fn dropped(&self) -> u64 {
        let rings = self.inner.rings.lock().unwrap_or_else(|e| e.into_inner());
        rings
            .iter()
            .map(|(_, r)| r.dropped.0.load(Ordering::Relaxed))
            .sum()
    }

    /// Subscribes to `stream` on `framework` directly (what `init` does).
    pub fn attach(&self, framework: &Framework, stream: StreamId) {
        let key = (framework.id(), stream);
        if !self
            .inner
            .registered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key)
        {
            return;
        }
        for &t in &self.inner.trace_types {
            let inner = self.inner.clone();
            let _ = framework.register_callback(stream, t, move |n| inner.record(n));
        }
    }
}

impl Subscriber for Recorder {
    fn name(&self) -> &str {
        "strobe-recorder"
    }
    fn init(&self, framework: &Framework, stream: &StreamInit<'_>) {
        self.attach(framework, stream.id);
    }
    fn finish(&self, _framework: &Framework, _stream_name: &CStr) {}
}
