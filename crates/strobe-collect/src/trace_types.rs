//! How tracing trace-point types map to database categories.
//!
//! Owns the table; pure functions, no state.

use strobe_trace::types::trace_point::*;

/// The region category of a begin/end trace-point pair, or `None` for
/// instants.
pub fn span_category(begin: u16) -> Option<&'static str> {
    Some(match begin {
        REGION_BEGIN => "user",
        TASK_BEGIN => "task",
        BARRIER_BEGIN => "barrier",
        LOCK_BEGIN => "lock",
        TRANSFER_BEGIN => "transfer",
        THREAD_BEGIN => "thread",
        WAIT_BEGIN => "wait",
        FUNCTION_BEGIN | FUNCTION_WITH_ARGS_BEGIN => "function",
        MEM_ALLOC_BEGIN | MEM_RELEASE_BEGIN => "memory",
        b if b & 0x80 != 0 => "user_defined",
        _ => return None,
    })
}

/// The category of an instant notification.
pub fn instant_category(trace_type: u16) -> &'static str {
    if trace_type == SIGNAL {
        "marker"
    } else {
        "xpti"
    }
}
