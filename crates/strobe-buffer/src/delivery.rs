//! Callback threads: the shared default delivery thread and the ones tools
//! create, each running the callbacks of the buffers assigned to it.
//!
//! Owns spawning those threads, their loop (deliver, answer flushes, park),
//! and waking them. A buffer's callbacks run only on its assigned thread.
//! Waking (`Thread::unpark`) never allocates or locks, so producers may call
//! it from the emplace slow path. Threads are started on first need (the
//! first buffer, or `create_callback_thread`), never from a constructor.

use crate::error::{Error, Result};
use crate::record::RecordHeader;
use crate::registry::Registry;
use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, OnceLock};
use std::thread::Thread;
use std::time::Duration;

/// Most callback threads a process may create (the default one included).
pub const MAX_CALLBACK_THREADS: usize = 256;

/// How long an idle callback thread sleeps before it looks again (a safety
/// net: producers and flushes wake it explicitly).
const IDLE_PARK: Duration = Duration::from_millis(20);

pub(crate) struct CallbackThreadInner {
    id: u64,
    thread: OnceLock<Thread>,
}

static THREADS: Registry<CallbackThreadInner, MAX_CALLBACK_THREADS> = Registry::new();
static DEFAULT_THREAD: Mutex<u64> = Mutex::new(0);

thread_local! {
    static CURRENT: Cell<u64> = const { Cell::new(0) };
}

/// A handle to a callback thread (seed 001's `callback_thread_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallbackThread {
    id: u64,
}

impl CallbackThread {
    /// Starts a new callback thread (seed 001's `create_callback_thread`).
    /// Assign buffers to it with [`crate::Buffer::assign_callback_thread`].
    pub fn create() -> Result<CallbackThread> {
        spawn().map(|id| CallbackThread { id })
    }

    /// The shared default callback thread (started on first use).
    pub fn default_thread() -> Result<CallbackThread> {
        default_thread_id().map(|id| CallbackThread { id })
    }

    /// The thread's id (non-zero).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The callback thread with this id.
    pub fn from_id(id: u64) -> Result<CallbackThread> {
        lookup(id).map(|_| CallbackThread { id })
    }

    /// The id of the callback thread the caller runs on, if it is one.
    pub fn current() -> Option<CallbackThread> {
        match current_thread_id() {
            0 => None,
            id => Some(CallbackThread { id }),
        }
    }
}

pub(crate) fn lookup(id: u64) -> Result<&'static CallbackThreadInner> {
    THREADS.get(id).ok_or(Error::UnknownCallbackThread(id))
}

/// The id of the callback thread running on this OS thread (0 = none).
#[inline]
pub(crate) fn current_thread_id() -> u64 {
    CURRENT.with(|c| c.get())
}

pub(crate) fn default_thread_id() -> Result<u64> {
    let mut guard = DEFAULT_THREAD.lock().unwrap_or_else(|e| e.into_inner());
    if *guard == 0 {
        *guard = spawn()?;
    }
    Ok(*guard)
}

fn spawn() -> Result<u64> {
    let made = THREADS.insert_with(|id| {
        Ok::<_, Error>(CallbackThreadInner {
            id,
            thread: OnceLock::new(),
        })
    });
    let inner = match made {
        Some(Ok(inner)) => inner,
        Some(Err(e)) => return Err(e),
        None => {
            return Err(Error::LimitReached {
                what: "callback threads",
                limit: MAX_CALLBACK_THREADS,
            })
        }
    };
    let id = inner.id;
    let handle = std::thread::Builder::new()
        .name(format!("strobe-cb-{id}"))
        .spawn(move || run(id))
        .map_err(|e| Error::ThreadSpawn(e.to_string()))?;
    let _ = inner.thread.set(handle.thread().clone());
    Ok(id)
}

/// Wakes callback thread `id`. Never allocates or locks.
#[inline]
pub(crate) fn wake(id: u64) {
    if let Some(inner) = THREADS.get(id) {
        if let Some(thread) = inner.thread.get() {
            thread.unpark();
        }
    }
}

fn run(id: u64) {
    CURRENT.with(|c| c.set(id));
    let mut scratch: Vec<RecordHeader> = Vec::new();
    loop {
        let mut worked = false;
        for buffer in crate::buffer::BUFFERS.iter() {
            if buffer.callback_thread.load(Ordering::Acquire) == id {
                worked |= buffer.deliver_pending(&mut scratch);
            }
        }
        if !worked {
            std::thread::park_timeout(IDLE_PARK);
        }
    }
}
