//! How tracing trace-point types (`strobe_wire::trace_point`) map to
//! database categories.
//!
//! Owns the table; pure functions, no state.

use std::borrow::Cow;
use strobe_wire::trace_point::*;

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

/// The `trace_type` argument of an instant: upstream's name of its type
/// (`node_create`, `queue_create`, …), `user_defined+N` for the N-th type a
/// tool defined, else the code.
pub fn instant_type_name(trace_type: u16) -> Cow<'static, str> {
    match name(trace_type) {
        Some(n) => Cow::Borrowed(n),
        None if trace_type & USER_DEFINED != 0 => {
            Cow::Owned(format!("user_defined+{}", trace_type & !USER_DEFINED))
        }
        None => Cow::Owned(trace_type.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_name_their_type() {
        assert_eq!(instant_type_name(EDGE_CREATE), "edge_create");
        assert_eq!(instant_type_name(QUEUE_CREATE), "queue_create");
        assert_eq!(instant_type_name(USER_DEFINED | 3), "user_defined+3");
        assert_eq!(instant_type_name(USER_DEFINED), "user_defined");
        assert_eq!(instant_type_name(44), "44");
    }
}
