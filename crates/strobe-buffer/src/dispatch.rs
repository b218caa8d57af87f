//! Process-wide emission: producers hand a record to every active context
//! that traces its kind.
//!
//! Owns the per-kind tables of active services (filled by `Context::start`,
//! emptied by `Context::stop`) and the `emit*` / `callback_enter` entry
//! points producers call. With no active service for a kind, emission costs
//! one relaxed atomic load. It never allocates, locks or formats; services
//! are leaked, so a producer racing with `stop` still holds valid pointers.

use crate::buffer::Emplace;
use crate::buffer_tracing::BufferService;
use crate::callback_tracing::{CallbackScope, CallbackService};
use crate::kind::{Kind, KIND_SLOTS};
use crate::record::{
    frames_as_bytes, MarkerRecord, Payload, SampleRecord, MAX_MARKER_TEXT, MAX_SAMPLE_FRAMES,
};
use crate::service_table::Table;

pub use crate::service_table::MAX_ACTIVE_SERVICES_PER_KIND;

static BUFFER_TABLES: [Table<BufferService>; KIND_SLOTS] = [const { Table::new() }; KIND_SLOTS];
static CALLBACK_TABLES: [Table<CallbackService>; KIND_SLOTS] = [const { Table::new() }; KIND_SLOTS];

pub(crate) fn activate_buffer(kind: Kind, svc: &'static BufferService) -> bool {
    BUFFER_TABLES[kind as usize].insert(svc)
}
pub(crate) fn deactivate_buffer(kind: Kind, svc: &'static BufferService) {
    BUFFER_TABLES[kind as usize].remove(svc)
}
pub(crate) fn activate_callback(kind: Kind, svc: &'static CallbackService) -> bool {
    CALLBACK_TABLES[kind as usize].insert(svc)
}
pub(crate) fn deactivate_callback(kind: Kind, svc: &'static CallbackService) {
    CALLBACK_TABLES[kind as usize].remove(svc)
}

/// In a forked child: stops every context of the parent from receiving
/// records, without taking a lock (the parent's callback threads do not
/// exist in the child, so its buffers could never be delivered). Contexts
/// created afterwards work normally. Call first thing after `fork()`
/// returns in the child.
pub fn forget_contexts_after_fork() {
    for table in &BUFFER_TABLES {
        table.clear();
    }
    for table in &CALLBACK_TABLES {
        table.clear();
    }
}

/// What an emission did: how many buffers stored the record and how many
/// dropped it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Emitted {
    /// Buffers that stored the record.
    pub stored: u32,
    /// Buffers that dropped it (counted there, reported as `drop_count`).
    pub dropped: u32,
}

/// Emits a typed record to every active context tracing `T::KIND` whose
/// filter accepts `operation`. Never allocates or locks.
#[inline]
pub fn emit<T: Payload>(operation: u32, payload: &T) -> Emitted {
    emit_bytes(T::KIND, operation, payload.as_bytes(), &[])
}

/// Emits a record made of `head` followed by `tail` for `kind` to every
/// active context tracing it. Never allocates or locks.
#[inline]
pub fn emit_bytes(kind: Kind, operation: u32, head: &[u8], tail: &[u8]) -> Emitted {
    let mut out = Emitted::default();
    BUFFER_TABLES[kind as usize].for_each(|svc| {
        if svc.filter.allows(operation) {
            match svc
                .buffer
                .emplace(kind.category() as u32, kind as u32, operation, head, tail)
            {
                Emplace::Stored => out.stored += 1,
                Emplace::Dropped => out.dropped += 1,
            }
        }
    });
    out
}

/// Whether any active context traces `kind` into a buffer (one atomic
/// load; lets producers skip building a record).
#[inline]
pub fn is_traced(kind: Kind) -> bool {
    !BUFFER_TABLES[kind as usize].is_empty()
}

pub(crate) fn prepare_sample<'a>(
    head: &SampleRecord,
    frames: &'a [u64],
) -> (SampleRecord, &'a [u64]) {
    let mut head = *head;
    let frames = if frames.len() > MAX_SAMPLE_FRAMES {
        head.flags |= 1;
        &frames[..MAX_SAMPLE_FRAMES]
    } else {
        frames
    };
    head.frame_count = frames.len() as u32;
    (head, frames)
}

pub(crate) fn prepare_marker<'a>(head: &MarkerRecord, text: &'a [u8]) -> (MarkerRecord, &'a [u8]) {
    let mut head = *head;
    let text = &text[..text.len().min(MAX_MARKER_TEXT)];
    head.text_len = text.len() as u32;
    (head, text)
}

/// Emits a sample with its frame addresses, innermost first (see
/// [`crate::Context::emit_sample`]).
#[inline]
pub fn emit_sample(operation: u32, head: &SampleRecord, frames: &[u64]) -> Emitted {
    if !is_traced(Kind::Sample) {
        return Emitted::default();
    }
    let (head, frames) = prepare_sample(head, frames);
    emit_bytes(
        Kind::Sample,
        operation,
        head.as_bytes(),
        frames_as_bytes(frames),
    )
}

/// Emits a marker with text (see [`crate::Context::emit_marker`]).
#[inline]
pub fn emit_marker(operation: u32, head: &MarkerRecord, text: &[u8]) -> Emitted {
    if !is_traced(Kind::Marker) {
        return Emitted::default();
    }
    let (head, text) = prepare_marker(head, text);
    emit_bytes(Kind::Marker, operation, head.as_bytes(), text)
}

/// Runs the enter phase of every active callback tracing service for
/// `kind` that accepts `operation`, on this thread, and returns the scope
/// whose exit runs their exit phases (in reverse order) with the per-call
/// user data each enter wrote. Never allocates or locks.
#[inline]
pub fn callback_enter(kind: Kind, operation: u32, payload: &[u8]) -> CallbackScope {
    let mut scope = CallbackScope::new(kind, operation);
    CALLBACK_TABLES[kind as usize].for_each(|svc| scope.enter(svc, payload));
    scope
}
