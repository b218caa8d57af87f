//! Callback threads at work: the shared default delivery thread and the
//! ones tools create, each running the callbacks of the buffers assigned
//! to it.
//!
//! Owns spawning those threads and their loop (deliver, answer flushes,
//! park); their handles, registry and waking are `callback_thread`'s.
//! A buffer's callbacks run only on its assigned thread. Threads are
//! started on first need (the first buffer, or `create_callback_thread`),
//! never from a constructor.

use crate::callback_thread;
use crate::error::{Error, Result};
use crate::record::RecordHeader;
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::Duration;

pub use crate::callback_thread::{CallbackThread, MAX_CALLBACK_THREADS};

/// How long an idle callback thread sleeps before it looks again (a safety
/// net: producers and flushes wake it explicitly).
const IDLE_PARK: Duration = Duration::from_millis(20);

static DEFAULT_THREAD: Mutex<u64> = Mutex::new(0);

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
}

pub(crate) fn default_thread_id() -> Result<u64> {
    let mut guard = DEFAULT_THREAD.lock().unwrap_or_else(|e| e.into_inner());
    if *guard == 0 {
        *guard = spawn()?;
    }
    Ok(*guard)
}

fn spawn() -> Result<u64> {
    let inner = callback_thread::register()?;
    let id = inner.id;
    let handle = std::thread::Builder::new()
        .name(format!("strobe-cb-{id}"))
        .spawn(move || run(id))
        .map_err(|e| Error::ThreadSpawn(e.to_string()))?;
    let _ = inner.thread.set(handle.thread().clone());
    Ok(id)
}

fn run(id: u64) {
    callback_thread::mark_current(id);
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
