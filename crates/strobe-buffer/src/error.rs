//! The errors of the buffered record service and their C status codes.
//!
//! Owns [`Error`] (what went wrong, where, and what to do) and the mapping to
//! the `strobe_status_t` values of `include/strobe_tool.h`. Nothing here runs
//! on a producer's hot path.

use thiserror::Error;

/// Everything the service's configuration calls can refuse.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Error {
    /// A context handle that was never created.
    #[error("unknown context {0}: create it with create_context first")]
    UnknownContext(u64),
    /// A buffer handle that was never created.
    #[error("unknown buffer {0}: create it with create_buffer first")]
    UnknownBuffer(u64),
    /// A callback thread handle that was never created.
    #[error("unknown callback thread {0}: create it with create_callback_thread first")]
    UnknownCallbackThread(u64),
    /// A kind value outside the catalogue.
    #[error("unknown tracing kind {0}: see strobe_buffer::kind::kinds() for valid kinds")]
    UnknownKind(u32),
    /// An operation value the kind does not have.
    #[error("kind '{kind}' has no operation {operation} (it has {count}: 0..{count})")]
    UnknownOperation {
        /// The kind's name.
        kind: &'static str,
        /// The operation asked for.
        operation: u32,
        /// How many operations the kind has.
        count: u32,
    },
    /// Configuration attempted while the context runs.
    #[error(
        "context {0} is active: configure services and assign callback threads before \
         start_context, or stop the context first"
    )]
    ContextActive(u64),
    /// The (context, kind) pair already has a service of this sort.
    #[error("context {context} already has a {service} service for kind '{kind}': configure each (context, kind) pair once")]
    ServiceAlreadyConfigured {
        /// The context.
        context: u64,
        /// The kind's name.
        kind: &'static str,
        /// `"buffer tracing"` or `"callback tracing"`.
        service: &'static str,
    },
    /// A service was given a buffer that belongs to another context.
    #[error("buffer {buffer} belongs to context {owner}, not context {context}: create the buffer in the context that uses it")]
    BufferOfOtherContext {
        /// The buffer.
        buffer: u64,
        /// Its context.
        owner: u64,
        /// The context being configured.
        context: u64,
    },
    /// An argument is out of range.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A fixed table is full.
    #[error("too many {what} (limit {limit}); this limit is compiled into strobe-buffer")]
    LimitReached {
        /// What ran out.
        what: &'static str,
        /// The limit.
        limit: usize,
    },
    /// `flush` called on the thread that delivers the buffer (it would wait
    /// for itself).
    #[error("flush of buffer {0} called from its own callback thread: it would wait for itself; flush from another thread")]
    FlushOnDeliveryThread(u64),
    /// A callback thread could not be started.
    #[error("could not start a callback thread: {0}")]
    ThreadSpawn(String),
}

/// `strobe_status_t` values (C ABI, stable).
pub mod status {
    /// Success.
    pub const OK: i32 = 0;
    /// An error without a more precise code.
    pub const ERROR: i32 = 1;
    /// An argument is out of range or null.
    pub const INVALID_ARGUMENT: i32 = 2;
    /// A context, buffer or callback thread handle that does not exist.
    pub const NOT_FOUND: i32 = 3;
    /// The context is active.
    pub const CONTEXT_ACTIVE: i32 = 4;
    /// The (context, kind) service is already configured.
    pub const SERVICE_ALREADY_CONFIGURED: i32 = 5;
    /// A fixed table is full.
    pub const LIMIT_REACHED: i32 = 6;
    /// The tool and host API versions are incompatible.
    pub const INCOMPATIBLE_VERSION: i32 = 7;
    /// Unknown kind.
    pub const UNKNOWN_KIND: i32 = 8;
    /// Unknown operation.
    pub const UNKNOWN_OPERATION: i32 = 9;
    /// The call would deadlock (flush from the buffer's own callback thread).
    pub const WOULD_DEADLOCK: i32 = 10;
    /// The record was dropped.
    pub const RECORD_DROPPED: i32 = 11;
}

impl Error {
    /// The C status code for this error.
    pub fn status(&self) -> i32 {
        match self {
            Error::UnknownContext(_)
            | Error::UnknownBuffer(_)
            | Error::UnknownCallbackThread(_) => status::NOT_FOUND,
            Error::UnknownKind(_) => status::UNKNOWN_KIND,
            Error::UnknownOperation { .. } => status::UNKNOWN_OPERATION,
            Error::ContextActive(_) => status::CONTEXT_ACTIVE,
            Error::ServiceAlreadyConfigured { .. } => status::SERVICE_ALREADY_CONFIGURED,
            Error::BufferOfOtherContext { .. } | Error::InvalidArgument(_) => {
                status::INVALID_ARGUMENT
            }
            Error::LimitReached { .. } => status::LIMIT_REACHED,
            Error::FlushOnDeliveryThread(_) => status::WOULD_DEADLOCK,
            Error::ThreadSpawn(_) => status::ERROR,
        }
    }
}

/// A human-readable name for a C status code.
pub fn status_name(code: i32) -> &'static str {
    match code {
        status::OK => "success",
        status::ERROR => "error",
        status::INVALID_ARGUMENT => "invalid argument",
        status::NOT_FOUND => "handle not found",
        status::CONTEXT_ACTIVE => "context is active",
        status::SERVICE_ALREADY_CONFIGURED => "service already configured",
        status::LIMIT_REACHED => "limit reached",
        status::INCOMPATIBLE_VERSION => "incompatible API version",
        status::UNKNOWN_KIND => "unknown kind",
        status::UNKNOWN_OPERATION => "unknown operation",
        status::WOULD_DEADLOCK => "would deadlock",
        status::RECORD_DROPPED => "record dropped",
        _ => "unknown status",
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
