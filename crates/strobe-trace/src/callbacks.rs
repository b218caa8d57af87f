//! Callback tables: for each stream, for each trace-point type, the list of
//! callbacks to run on a notification.
//!
//! Layout: `streams[stream id] -> pages[type >> 8] -> lists[type & 0xff] ->
//! [callback]`, every level behind an `AtomicPtr`. Writers (register,
//! unregister) build a new list and publish it with one store, under the
//! table's writer lock; the old list is retired into an append-only list that
//! is freed only when the table is dropped (no reader can hold it then).
//!
//! Owns the callback lists. The read side ([`CallbackTable::callbacks`]) must
//! never lock, allocate or write shared memory: it is the notify hot path.

use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::TraceError;
use crate::event::EventData;
use crate::types::StreamId;

/// A C subscriber callback: `void cb(uint16_t trace_type,
/// trace_event_data_t *parent, trace_event_data_t *event, uint64_t instance,
/// const void *user_data)`.
pub type RawCallback =
    unsafe extern "C" fn(u16, *mut EventData, *mut EventData, u64, *const c_void);

/// What a Rust callback receives for one notification.
#[derive(Clone, Copy)]
pub struct Notification<'a> {
    /// The framework that sent the notification (to query payloads,
    /// metadata, stream names).
    pub framework: &'a crate::Framework,
    /// The stream the notification was sent on.
    pub stream: StreamId,
    /// The trace-point type.
    pub trace_type: u16,
    /// The parent event, when one was given.
    pub parent: Option<&'a EventData>,
    /// The event, when one was given (may be absent only for the types of
    /// [`crate::types::trace_point::allows_null_event`]).
    pub event: Option<&'a EventData>,
    /// The instance number the instrumentation passed.
    pub instance: u64,
    /// Per-instance user data, valid only during the callback.
    pub user_data: *const c_void,
}

/// A Rust callback.
pub type RustCallback = Arc<dyn Fn(&Notification<'_>) + Send + Sync>;

/// The handle a registered Rust callback is unregistered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallbackHandle(u64);

#[derive(Clone)]
pub(crate) enum Callback {
    Raw(RawCallback),
    Rust(CallbackHandle, RustCallback),
}

impl Callback {
    fn same(&self, other: &Callback) -> bool {
        match (self, other) {
            (Callback::Raw(a), Callback::Raw(b)) => *a as usize == *b as usize,
            (Callback::Rust(a, _), Callback::Rust(b, _)) => a == b,
            _ => false,
        }
    }
}

type List = Box<[Callback]>;

struct Page {
    lists: [AtomicPtr<List>; 256],
}

struct StreamCallbacks {
    pages: [AtomicPtr<Page>; 256],
    /// How many trace types of this stream have a non-empty list.
    active_types: AtomicU32,
}

/// Every stream's callback lists.
pub(crate) struct CallbackTable {
    streams: [AtomicPtr<StreamCallbacks>; 256],
    writer: Mutex<Retired>,
    next_handle: std::sync::atomic::AtomicU64,
}

#[derive(Default)]
struct Retired {
    lists: Vec<*mut List>,
}

// SAFETY: the raw pointers in `Retired` are owned boxes only touched under the
// writer mutex and in Drop.
unsafe impl Send for Retired {}

fn new_atomic_array<T, const N: usize>() -> [AtomicPtr<T>; N] {
    std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut()))
}

impl CallbackTable {
    pub(crate) fn new() -> Self {
        CallbackTable {
            streams: new_atomic_array(),
            writer: Mutex::new(Retired::default()),
            next_handle: std::sync::atomic::AtomicU64::new(1),
        }
    }

    pub(crate) fn new_handle(&self) -> CallbackHandle {
        CallbackHandle(self.next_handle.fetch_add(1, Ordering::Relaxed))
    }

    /// The callbacks for (stream, type): an empty slice when none. Hot path:
    /// three dependent atomic loads, no writes.
    #[inline]
    pub(crate) fn callbacks(&self, stream: StreamId, trace_type: u16) -> &[Callback] {
        let s = self.streams[stream as usize].load(Ordering::Acquire);
        if s.is_null() {
            return &[];
        }
        // SAFETY: stream blocks are published once and freed only in Drop.
        let s = unsafe { &*s };
        let page = s.pages[(trace_type >> 8) as usize].load(Ordering::Acquire);
        if page.is_null() {
            return &[];
        }
        // SAFETY: pages are published once and freed only in Drop.
        let page = unsafe { &*page };
        let list = page.lists[(trace_type & 0xff) as usize].load(Ordering::Acquire);
        if list.is_null() {
            return &[];
        }
        // SAFETY: a published list is never freed before the table is
        // dropped (replaced lists are retired, not freed), so the borrow tied
        // to `&self` is valid.
        unsafe { &*list }
    }

    /// Whether any callback exists on `stream` (for `trace_type == 0`) or for
    /// that exact type.
    pub(crate) fn has_callbacks(&self, stream: StreamId, trace_type: u16) -> bool {
        if trace_type == 0 {
            let s = self.streams[stream as usize].load(Ordering::Acquire);
            // SAFETY: see `callbacks`.
            !s.is_null() && unsafe { &*s }.active_types.load(Ordering::Relaxed) > 0
        } else {
            !self.callbacks(stream, trace_type).is_empty()
        }
    }

    fn slot(&self, stream: StreamId, trace_type: u16) -> (&StreamCallbacks, &AtomicPtr<List>) {
        // Called with the writer lock held: allocation of missing levels is
        // race-free.
        let sp = &self.streams[stream as usize];
        if sp.load(Ordering::Acquire).is_null() {
            let b = Box::new(StreamCallbacks {
                pages: new_atomic_array(),
                active_types: AtomicU32::new(0),
            });
            sp.store(Box::into_raw(b), Ordering::Release);
        }
        // SAFETY: just ensured non-null; freed only in Drop.
        let s = unsafe { &*sp.load(Ordering::Acquire) };
        let pp = &s.pages[(trace_type >> 8) as usize];
        if pp.load(Ordering::Acquire).is_null() {
            let b = Box::new(Page {
                lists: new_atomic_array(),
            });
            pp.store(Box::into_raw(b), Ordering::Release);
        }
        // SAFETY: just ensured non-null; freed only in Drop.
        let page = unsafe { &*pp.load(Ordering::Acquire) };
        (s, &page.lists[(trace_type & 0xff) as usize])
    }

    /// Adds `cb` to (stream, type). `Duplicate` when the same callback is
    /// already there.
    pub(crate) fn add(
        &self,
        stream: StreamId,
        trace_type: u16,
        cb: Callback,
    ) -> Result<(), TraceError> {
        let mut retired = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let (s, slot) = self.slot(stream, trace_type);
        let old = slot.load(Ordering::Acquire);
        // SAFETY: lists are valid until Drop (see `callbacks`).
        let old_list: &[Callback] = if old.is_null() { &[] } else { unsafe { &*old } };
        if old_list.iter().any(|c| c.same(&cb)) {
            return Err(TraceError::Duplicate(
                "this callback is already registered for this stream and trace type",
            ));
        }
        let mut new: Vec<Callback> = old_list.to_vec();
        new.push(cb);
        let new_ptr = Box::into_raw(Box::new(new.into_boxed_slice()));
        slot.store(new_ptr, Ordering::Release);
        if old_list.is_empty() {
            s.active_types.fetch_add(1, Ordering::Relaxed);
        }
        if !old.is_null() {
            retired.lists.push(old);
        }
        Ok(())
    }

    /// Removes the callback equal to `cb` from (stream, type). `NotFound`
    /// when it is not there.
    pub(crate) fn remove(
        &self,
        stream: StreamId,
        trace_type: u16,
        cb: &Callback,
    ) -> Result<(), TraceError> {
        let mut retired = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let not_found = TraceError::NotFound("no such callback on this stream and trace type");
        let s = self.streams[stream as usize].load(Ordering::Acquire);
        if s.is_null() {
            return Err(not_found);
        }
        // SAFETY: freed only in Drop.
        let s = unsafe { &*s };
        let page = s.pages[(trace_type >> 8) as usize].load(Ordering::Acquire);
        if page.is_null() {
            return Err(not_found);
        }
        // SAFETY: freed only in Drop.
        let slot = &unsafe { &*page }.lists[(trace_type & 0xff) as usize];
        let old = slot.load(Ordering::Acquire);
        if old.is_null() {
            return Err(not_found);
        }
        // SAFETY: valid until Drop.
        let old_list: &[Callback] = unsafe { &*old };
        let Some(pos) = old_list.iter().position(|c| c.same(cb)) else {
            return Err(not_found);
        };
        let mut new: Vec<Callback> = old_list.to_vec();
        new.remove(pos);
        let new_ptr = if new.is_empty() {
            s.active_types.fetch_sub(1, Ordering::Relaxed);
            ptr::null_mut()
        } else {
            Box::into_raw(Box::new(new.into_boxed_slice()))
        };
        slot.store(new_ptr, Ordering::Release);
        retired.lists.push(old);
        Ok(())
    }

    /// Removes every callback of a stream; whether it had any.
    pub(crate) fn clear_stream(&self, stream: StreamId) -> bool {
        let mut retired = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let s = self.streams[stream as usize].load(Ordering::Acquire);
        if s.is_null() {
            return false;
        }
        let mut had_any = false;
        // SAFETY: freed only in Drop.
        let s = unsafe { &*s };
        for pp in &s.pages {
            let page = pp.load(Ordering::Acquire);
            if page.is_null() {
                continue;
            }
            // SAFETY: freed only in Drop.
            for slot in &unsafe { &*page }.lists {
                let old = slot.swap(ptr::null_mut(), Ordering::AcqRel);
                if !old.is_null() {
                    retired.lists.push(old);
                    had_any = true;
                }
            }
        }
        s.active_types.store(0, Ordering::Relaxed);
        had_any
    }
}

impl Drop for CallbackTable {
    fn drop(&mut self) {
        let retired = std::mem::take(
            &mut self
                .writer
                .get_mut()
                .unwrap_or_else(|e| e.into_inner())
                .lists,
        );
        for l in retired {
            // SAFETY: retired lists were created by Box::into_raw and are
            // referenced by nobody now that the table is being dropped.
            drop(unsafe { Box::from_raw(l) });
        }
        for sp in &self.streams {
            let s = sp.load(Ordering::Acquire);
            if s.is_null() {
                continue;
            }
            // SAFETY: created by Box::into_raw; exclusive access in Drop.
            let s = unsafe { Box::from_raw(s) };
            for pp in &s.pages {
                let page = pp.load(Ordering::Acquire);
                if page.is_null() {
                    continue;
                }
                // SAFETY: as above.
                let page = unsafe { Box::from_raw(page) };
                for slot in &page.lists {
                    let l = slot.load(Ordering::Acquire);
                    if !l.is_null() {
                        // SAFETY: as above.
                        drop(unsafe { Box::from_raw(l) });
                    }
                }
            }
        }
    }
}
