//! Setting a buffer up: creating it in a context, and moving it to another
//! callback thread.
//!
//! Owns the rules that tie a buffer to the rest: its context must exist,
//! and must be inactive while the buffer changes threads; a buffer without
//! a chosen thread gets the default one (started on first need); a moved
//! buffer's pending records are delivered by its old thread first. Never on
//! a producer path (it allocates, locks and may start a thread).

use crate::buffer::{self, Buffer, BufferInner, BufferOptions, Callback, Delivery};
use crate::callback_thread::{self, CallbackThread};
use crate::context::{self, Context};
use crate::delivery;
use crate::error::{Error, Result};
use std::sync::atomic::Ordering;

impl Buffer {
    /// Creates a buffer in `context` whose records reach `callback` on the
    /// default callback thread (seed 001's `create_buffer`).
    ///
    /// The size is rounded up to the page size; a watermark above the size
    /// acts as the size. Errors: unknown context, size 0, blocks outside
    /// `1..=MAX_BLOCKS`, out of memory, too many buffers.
    pub fn create(
        context: &Context,
        options: BufferOptions,
        callback: impl FnMut(&Delivery<'_>) + Send + 'static,
    ) -> Result<Buffer> {
        create_buffer(context.id(), options, Callback::Rust(Box::new(callback)))
    }

    /// Makes `thread` run this buffer's callbacks (seed 001's
    /// `assign_callback_thread`). Only while the buffer's context is
    /// inactive; pending records are flushed to the old thread first.
    pub fn assign_callback_thread(&self, thread: CallbackThread) -> Result<()> {
        assign(self.inner, thread.id())
    }
}

/// Creates a buffer in context `context` (seed 001's `create_buffer`; see
/// [`Buffer::create`]).
pub(crate) fn create_buffer(
    context: u64,
    options: BufferOptions,
    callback: Callback,
) -> Result<Buffer> {
    let ctx = context::lookup(context)?;
    let capacity = buffer::checked_capacity(&options)?;
    let thread = match &options.callback_thread {
        Some(t) => t.id(),
        None => delivery::default_thread_id()?,
    };
    buffer::register(ctx.id, capacity, thread, &options, callback)
}

/// Moves buffer `inner` to callback thread `thread` (see
/// [`Buffer::assign_callback_thread`]).
fn assign(inner: &'static BufferInner, thread: u64) -> Result<()> {
    callback_thread::lookup(thread)?;
    let ctx = context::lookup(inner.context)?;
    if ctx.is_active() {
        return Err(Error::ContextActive(inner.context));
    }
    let old = inner.callback_thread.load(Ordering::Acquire);
    if old == thread {
        return Ok(());
    }
    if callback_thread::current_thread_id() != old {
        // Anything still queued is delivered by the old thread, so a
        // buffer's callbacks never run on two threads at once.
        inner.flush()?;
    }
    inner.callback_thread.store(thread, Ordering::Release);
    Ok(())
}
