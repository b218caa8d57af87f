//! Buffer tracing services: what a context sends records of one kind to
//! (seed 001's `configure_buffer_tracing_service`), an operation filter
//! and a buffer.
//!
//! Owns the service's parts only; services are made by
//! `Context::configure_buffer_tracing`, leaked (a producer racing with a
//! context's stop still holds a valid one), and emitted into through the
//! context or the process-wide tables. Never allocates or locks when used.

use crate::buffer::BufferInner;
use crate::filter::OperationFilter;

/// A buffer tracing service.
pub(crate) struct BufferService {
    pub(crate) filter: OperationFilter,
    pub(crate) buffer: &'static BufferInner,
}
