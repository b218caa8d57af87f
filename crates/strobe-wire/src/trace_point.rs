//! Trace-point types: the codes a tracing notification's `trace_type`
//! holds (seed 004's `trace_point_type_t`), which event records carry
//! ([`crate::record::XptiBody::trace_type`]) and the collector turns into
//! region categories and names.
//!
//! Owns the predefined codes, their upstream names and the user-defined
//! bit. Constants and pure functions only: it must never hold state. What
//! the tracing framework does with a type (which may carry a null event)
//! is `strobe-trace`'s.
//!
//! Bit 0 = begin (0) / end (1), bit 7 marks a user-defined type, bits
//! 8..15 hold the vendor id.

pub const GRAPH_CREATE: u16 = 2;
pub const NODE_CREATE: u16 = 4;
pub const EDGE_CREATE: u16 = 6;
pub const REGION_BEGIN: u16 = 8;
pub const REGION_END: u16 = 9;
pub const TASK_BEGIN: u16 = 10;
pub const TASK_END: u16 = 11;
pub const BARRIER_BEGIN: u16 = 12;
pub const BARRIER_END: u16 = 13;
pub const LOCK_BEGIN: u16 = 14;
pub const LOCK_END: u16 = 15;
pub const SIGNAL: u16 = 16;
pub const TRANSFER_BEGIN: u16 = 18;
pub const TRANSFER_END: u16 = 19;
pub const THREAD_BEGIN: u16 = 20;
pub const THREAD_END: u16 = 21;
pub const WAIT_BEGIN: u16 = 22;
pub const WAIT_END: u16 = 23;
pub const FUNCTION_BEGIN: u16 = 24;
pub const FUNCTION_END: u16 = 25;
pub const METADATA: u16 = 26;
pub const FUNCTION_WITH_ARGS_BEGIN: u16 = 28;
pub const FUNCTION_WITH_ARGS_END: u16 = 29;
pub const MEM_ALLOC_BEGIN: u16 = 32;
pub const MEM_ALLOC_END: u16 = 33;
pub const MEM_RELEASE_BEGIN: u16 = 34;
pub const MEM_RELEASE_END: u16 = 35;
pub const OFFLOAD_ALLOC_MEMORY_OBJECT_CONSTRUCT: u16 = 36;
pub const OFFLOAD_ALLOC_MEMORY_OBJECT_DESTRUCT: u16 = 37;
pub const OFFLOAD_ALLOC_MEMORY_OBJECT_ASSOCIATE: u16 = 38;
pub const OFFLOAD_ALLOC_MEMORY_OBJECT_RELEASE: u16 = 39;
pub const OFFLOAD_ALLOC_ACCESSOR: u16 = 40;
pub const QUEUE_CREATE: u16 = 42;
pub const QUEUE_DESTROY: u16 = 43;
pub const DIAGNOSTICS: u16 = 126;
pub const USER_DEFINED: u16 = 128;

/// Every predefined trace-point type, in code order (what the built-in
/// subscribers register for).
pub const ALL_PREDEFINED: &[u16] = &[
    2, 4, 6, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 20, 21, 22, 23, 24, 25, 26, 28, 29, 32, 33,
    34, 35, 36, 37, 38, 39, 40, 42, 43, 126,
];

/// The name upstream gives a predefined type, or `None` for other codes.
pub fn name(code: u16) -> Option<&'static str> {
    Some(match code {
        GRAPH_CREATE => "graph_create",
        NODE_CREATE => "node_create",
        EDGE_CREATE => "edge_create",
        REGION_BEGIN => "region_begin",
        REGION_END => "region_end",
        TASK_BEGIN => "task_begin",
        TASK_END => "task_end",
        BARRIER_BEGIN => "barrier_begin",
        BARRIER_END => "barrier_end",
        LOCK_BEGIN => "lock_begin",
        LOCK_END => "lock_end",
        SIGNAL => "signal",
        TRANSFER_BEGIN => "transfer_begin",
        TRANSFER_END => "transfer_end",
        THREAD_BEGIN => "thread_begin",
        THREAD_END => "thread_end",
        WAIT_BEGIN => "wait_begin",
        WAIT_END => "wait_end",
        FUNCTION_BEGIN => "function_begin",
        FUNCTION_END => "function_end",
        METADATA => "metadata",
        FUNCTION_WITH_ARGS_BEGIN => "function_with_args_begin",
        FUNCTION_WITH_ARGS_END => "function_with_args_end",
        MEM_ALLOC_BEGIN => "mem_alloc_begin",
        MEM_ALLOC_END => "mem_alloc_end",
        MEM_RELEASE_BEGIN => "mem_release_begin",
        MEM_RELEASE_END => "mem_release_end",
        OFFLOAD_ALLOC_MEMORY_OBJECT_CONSTRUCT => "offload_alloc_memory_object_construct",
        OFFLOAD_ALLOC_MEMORY_OBJECT_DESTRUCT => "offload_alloc_memory_object_destruct",
        OFFLOAD_ALLOC_MEMORY_OBJECT_ASSOCIATE => "offload_alloc_memory_object_associate",
        OFFLOAD_ALLOC_MEMORY_OBJECT_RELEASE => "offload_alloc_memory_object_release",
        OFFLOAD_ALLOC_ACCESSOR => "offload_alloc_accessor",
        QUEUE_CREATE => "queue_create",
        QUEUE_DESTROY => "queue_destroy",
        DIAGNOSTICS => "diagnostics",
        USER_DEFINED => "user_defined",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_predefined_type_has_a_name_and_the_list_is_in_code_order() {
        assert!(ALL_PREDEFINED.windows(2).all(|w| w[0] < w[1]));
        for &code in ALL_PREDEFINED {
            assert!(name(code).is_some(), "{code}");
            assert_eq!(code & USER_DEFINED, 0, "{code} is predefined");
        }
        assert_eq!(name(REGION_BEGIN), Some("region_begin"));
        assert_eq!(name(USER_DEFINED), Some("user_defined"));
        assert_eq!(name(44), None);
    }

    #[test]
    fn begins_are_even_and_their_ends_follow() {
        for (begin, end) in [
            (REGION_BEGIN, REGION_END),
            (TASK_BEGIN, TASK_END),
            (FUNCTION_WITH_ARGS_BEGIN, FUNCTION_WITH_ARGS_END),
            (MEM_RELEASE_BEGIN, MEM_RELEASE_END),
        ] {
            assert_eq!((begin & 1, end), (0, begin | 1));
        }
    }
}
