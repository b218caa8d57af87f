//! `strobe-buffer`: the buffered record service of seed 001.
//!
//! Every producer inside a profiled process (regions, samples, wrapped
//! library calls, memory operations, counters, markers, XPTI events) hands
//! records to consumers (the database writer, third-party tools) through
//! this crate, without blocking and without losing data silently.
//!
//! - [`Context`]: created, configured, started and stopped by a consumer;
//!   holds per-kind services.
//! - [`Buffer`]: size (rounded to the page size), watermark, [`Policy`]
//!   (lossless or discard), callback; per-thread shards so producers never
//!   share a written cache line; explicit [`Buffer::flush`].
//! - [`CallbackThread`]: the shared default delivery thread and extra ones;
//!   a buffer's callbacks always run on its assigned thread.
//! - Buffer tracing services ([`Context::configure_buffer_tracing`]) and
//!   callback tracing services ([`Context::configure_callback_tracing`]),
//!   with operation filters; the kinds, operations and record payloads are
//!   in [`kind`] and [`record`].
//! - Producers call [`emit`] (and friends) or [`Context::emit`]; nothing on
//!   that path allocates, locks or formats.
//! - [`tool`]: C tool plugins loaded from `STROBE_TOOL_LIB`, configured
//!   through the versioned table of [`ffi`] (`include/strobe_tool.h`).
//!
//! This crate must never do I/O on a producer path, and never start a thread
//! before the first buffer or callback thread is created.

mod block;
pub mod buffer;
mod buffer_setup;
mod buffer_tracing;
mod callback_thread;
pub mod callback_tracing;
pub mod context;
pub mod delivery;
pub mod dispatch;
pub mod error;
pub mod ffi;
mod filter;
mod handoff;
mod ids;
pub mod kind;
mod page;
pub mod record;
mod registry;
mod service_table;
pub mod thread_index;
pub mod tool;
mod warn;

pub use buffer::{
    flush_all, page_size, round_to_page, Buffer, BufferOptions, BufferStats, Delivery, Emplace,
    Policy,
};
pub use callback_tracing::{CallbackRecord, CallbackScope, Phase, UserData};
pub use context::Context;
pub use delivery::CallbackThread;
pub use dispatch::{
    callback_enter, emit, emit_bytes, emit_marker, emit_sample, is_traced, Emitted,
};
pub use error::{Error, Result};
pub use kind::{Category, Kind};
