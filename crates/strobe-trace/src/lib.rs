//! `strobe-trace`: strobe's tracing framework (seed 004, XPTI semantics) in
//! Rust.
//!
//! Instrumented code registers **streams**, describes trace points with
//! **payloads** (name, source file, line, column, code address), turns them
//! into **events** with stable 64-bit unique ids and per-visit instance
//! numbers, and **notifies** the callbacks subscribers registered for a
//! (stream, trace-point type). Strings are interned in a **string table**;
//! events carry **metadata** (key → object). Vendors extend the trace-point
//! and event types with **user-defined types**.
//!
//! ```
//! use strobe_trace::{Framework, PayloadSpec, types::{trace_point, event_type, activity}};
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use std::sync::Arc;
//!
//! let fw = Framework::new();
//! let stream = fw.register_stream(b"my.stream").unwrap();
//! let seen = Arc::new(AtomicU64::new(0));
//! let s2 = seen.clone();
//! fw.register_callback(stream, trace_point::TASK_BEGIN, move |n| {
//!     s2.fetch_add(n.instance, Ordering::Relaxed);
//! }).unwrap();
//! let p = PayloadSpec::at("kernel", "main.rs", 10, 4);
//! let (ev, instance) = fw.make_event(&p, event_type::ALGORITHM, activity::ACTIVE).unwrap();
//! fw.notify(stream, trace_point::TASK_BEGIN, None, Some(ev), instance, std::ptr::null()).unwrap();
//! assert_eq!(seen.load(Ordering::Relaxed), 1);
//! assert_eq!(fw.find_event(ev.unique_id()).unwrap().unique_id(), ev.unique_id());
//! ```
//!
//! The notify path takes no lock, allocates nothing and writes no shared
//! memory; the disabled check is one atomic load. The process-wide instance
//! behind the XPTI C ABI (`strobe-xpti`) is [`global()`].

mod arena;
mod callbacks;
mod enabled_mirror;
pub mod error;
pub mod event;
mod framework;
mod global;
mod index_table;
mod objects;
pub mod printer;
pub mod recorder;
mod scoped;
mod strings;
pub mod subscriber;
pub mod thread_state;
mod tracepoints;
pub mod types;

pub use callbacks::{CallbackHandle, Notification, RawCallback, RustCallback};
pub use error::{result_code, TraceError};
pub use event::{EventData, ObjectData, Payload, Reserved, Uid};
pub use framework::{EnablePolicy, Framework, StreamInit, Subscriber};
pub use global::{
    env_trace_enable, global, parse_trace_enable, reset_global, skip_env_subscribers,
    trace_enabled, BUILTIN_PRINTER, ENV_DISPATCHER, ENV_SUBSCRIBERS, ENV_TRACE_ENABLE,
};
pub use objects::{Object, ObjectTable};
pub use scoped::ScopedNotify;
pub use strings::StringTable;
pub use subscriber::{DylibSubscriber, LoadError};
pub use tracepoints::PayloadSpec;
