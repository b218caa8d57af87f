//! The error type of every fallible framework call and its mapping onto the
//! XPTI result codes.
//!
//! Owns no state; it must never format anything on a hot path (errors are
//! plain enum values, their text is produced only when displayed).

use crate::types::result;

/// Why a framework call did not do what was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    /// Tracing is disabled (`XPTI_TRACE_ENABLE=0`, no subscriber, or
    /// [`crate::Framework::set_enabled`]`(false)`); nothing was delivered.
    /// Maps to `XPTI_RESULT_FALSE`.
    #[error(
        "tracing is disabled: set XPTI_TRACE_ENABLE=1 and load a subscriber (XPTI_SUBSCRIBERS)"
    )]
    Disabled,
    /// An argument was null, empty, out of range or otherwise unusable.
    /// Maps to `XPTI_RESULT_INVALIDARG`.
    #[error("invalid argument: {0}")]
    InvalidArg(&'static str),
    /// The same callback is already registered for this stream and type, or
    /// the metadata key is already present on the event.
    /// Maps to `XPTI_RESULT_DUPLICATE`.
    #[error("already registered: {0}")]
    Duplicate(&'static str),
    /// Nothing matching was registered (callback, event, stash).
    /// Maps to `XPTI_RESULT_NOTFOUND`.
    #[error("not found: {0}")]
    NotFound(&'static str),
    /// A fixed-size table is full (streams, vendors).
    /// Maps to `XPTI_RESULT_FAIL`.
    #[error("table full: {0}")]
    Full(&'static str),
}

impl TraceError {
    /// The XPTI result code for this error.
    pub fn code(self) -> i32 {
        match self {
            TraceError::Disabled => result::FALSE,
            TraceError::InvalidArg(_) => result::INVALIDARG,
            TraceError::Duplicate(_) => result::DUPLICATE,
            TraceError::NotFound(_) => result::NOTFOUND,
            TraceError::Full(_) => result::FAIL,
        }
    }
}

/// Converts a framework result into an XPTI result code (`SUCCESS` on `Ok`).
pub fn result_code<T>(r: Result<T, TraceError>) -> i32 {
    match r {
        Ok(_) => result::SUCCESS,
        Err(e) => e.code(),
    }
}
