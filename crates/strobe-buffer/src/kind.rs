//! Record categories, tracing kinds and their operations: the catalogue that
//! names everything a record header can say.
//!
//! Owns the numeric values (they are part of the C ABI in
//! `include/strobe_tool.h` and must never be renumbered), the names, and
//! iteration over kinds and operations. It holds only constant tables: it must
//! never allocate, lock or depend on runtime state.

use std::fmt;

/// The broad class of a buffer record, as seed 001's `category` field.
///
/// Every record produced by a buffer tracing service carries the category of
/// its kind ([`Kind::category`]).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Category {
    /// Tracing records: regions, library calls, memory operations, markers,
    /// XPTI events.
    Tracing = 1,
    /// Statistical samples (call stacks taken by the sampler).
    Sampling = 2,
    /// Counter values.
    Counters = 3,
}

impl Category {
    /// The category with this numeric value, if any.
    pub const fn from_u32(value: u32) -> Option<Category> {
        match value {
            1 => Some(Category::Tracing),
            2 => Some(Category::Sampling),
            3 => Some(Category::Counters),
            _ => None,
        }
    }

    /// The lower-case name of the category (`"tracing"`, `"sampling"`,
    /// `"counters"`).
    pub const fn name(self) -> &'static str {
        match self {
            Category::Tracing => "tracing",
            Category::Sampling => "sampling",
            Category::Counters => "counters",
        }
    }
}

/// A tracing kind (seed 001's "domain"): what produced a record.
///
/// The numeric values are stable and shared with C (`STROBE_KIND_*`). A
/// service is configured per (context, kind) pair; operations refine a kind.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Regions with a start and an end ([`crate::record::RegionRecord`]).
    Region = 1,
    /// Call-stack samples ([`crate::record::SampleRecord`] + frame addresses).
    Sample = 2,
    /// Wrapped library calls, enter and exit with duration
    /// ([`crate::record::LibraryCallRecord`]).
    LibraryCall = 3,
    /// Memory operations: allocations, frees, mappings
    /// ([`crate::record::MemoryRecord`]).
    Memory = 4,
    /// Counter values ([`crate::record::CounterRecord`]).
    Counter = 5,
    /// Instant markers and progress points, with optional text
    /// ([`crate::record::MarkerRecord`] + text bytes).
    Marker = 6,
    /// XPTI trace-point notifications ([`crate::record::XptiRecord`]).
    Xpti = 7,
}

/// One more than the largest kind value: the size of per-kind tables.
pub const KIND_SLOTS: usize = 8;

/// Every kind, in numeric order.
pub const ALL_KINDS: [Kind; 7] = [
    Kind::Region,
    Kind::Sample,
    Kind::LibraryCall,
    Kind::Memory,
    Kind::Counter,
    Kind::Marker,
    Kind::Xpti,
];

/// Operations of [`Kind::Region`].
pub const REGION_OPERATIONS: &[&str] = &["user", "instrumented", "library"];
/// Operations of [`Kind::Sample`]: which timer or event took the sample.
pub const SAMPLE_OPERATIONS: &[&str] = &["cpu_time", "real_time", "perf_event"];
/// Operations of [`Kind::LibraryCall`]: the wrapped functions.
pub const LIBRARY_CALL_OPERATIONS: &[&str] = &[
    "pthread_create",
    "pthread_join",
    "pthread_mutex_lock",
    "pthread_mutex_unlock",
    "pthread_cond_wait",
    "pthread_barrier_wait",
    "fork",
    "exit",
    "dlopen",
    "dlclose",
    "open",
    "close",
    "read",
    "write",
    "fsync",
    "MPI_Init",
    "MPI_Finalize",
    "MPI_Send",
    "MPI_Recv",
    "MPI_Isend",
    "MPI_Irecv",
    "MPI_Wait",
    "MPI_Barrier",
    "MPI_Bcast",
    "MPI_Reduce",
    "MPI_Allreduce",
    "MPI_Alltoall",
];
/// Operations of [`Kind::Memory`].
pub const MEMORY_OPERATIONS: &[&str] = &[
    "malloc",
    "calloc",
    "realloc",
    "free",
    "posix_memalign",
    "aligned_alloc",
    "mmap",
    "munmap",
];
/// Operations of [`Kind::Counter`]: where the value comes from.
pub const COUNTER_OPERATIONS: &[&str] = &["hardware", "software", "rusage", "procfs", "user"];
/// Operations of [`Kind::Marker`].
pub const MARKER_OPERATIONS: &[&str] = &["instant", "progress", "latency_begin", "latency_end"];
/// Operations of [`Kind::Xpti`], in the order of [`XPTI_TRACE_POINT_CODES`].
pub const XPTI_OPERATIONS: &[&str] = &[
    "graph_create",
    "node_create",
    "edge_create",
    "region_begin",
    "region_end",
    "task_begin",
    "task_end",
    "barrier_begin",
    "barrier_end",
    "lock_begin",
    "lock_end",
    "signal",
    "transfer_begin",
    "transfer_end",
    "thread_begin",
    "thread_end",
    "wait_begin",
    "wait_end",
    "function_begin",
    "function_end",
    "metadata",
    "function_with_args_begin",
    "function_with_args_end",
    "mem_alloc_begin",
    "mem_alloc_end",
    "mem_release_begin",
    "mem_release_end",
    "offload_alloc_memory_object_construct",
    "offload_alloc_memory_object_destruct",
    "offload_alloc_memory_object_associate",
    "offload_alloc_memory_object_release",
    "offload_alloc_accessor",
    "queue_create",
    "queue_destroy",
    "diagnostics",
    "user_defined",
];
/// The XPTI trace-point type code of each [`XPTI_OPERATIONS`] entry (the
/// values of the XPTI ABI, REFERENCE.md §2).
pub const XPTI_TRACE_POINT_CODES: &[u16] = &[
    2, 4, 6, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 20, 21, 22, 23, 24, 25, 26, 28, 29, 32, 33,
    34, 35, 36, 37, 38, 39, 40, 42, 43, 126, 128,
];

impl Kind {
    /// The kind with this numeric value, if any.
    pub const fn from_u32(value: u32) -> Option<Kind> {
        match value {
            1 => Some(Kind::Region),
            2 => Some(Kind::Sample),
            3 => Some(Kind::LibraryCall),
            4 => Some(Kind::Memory),
            5 => Some(Kind::Counter),
            6 => Some(Kind::Marker),
            7 => Some(Kind::Xpti),
            _ => None,
        }
    }

    /// The kind's stable lower-case name (`"region"`, `"library_call"`, …).
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Region => "region",
            Kind::Sample => "sample",
            Kind::LibraryCall => "library_call",
            Kind::Memory => "memory",
            Kind::Counter => "counter",
            Kind::Marker => "marker",
            Kind::Xpti => "xpti",
        }
    }

    /// The kind whose [`Kind::name`] is `name`.
    pub fn from_name(name: &str) -> Option<Kind> {
        ALL_KINDS.iter().copied().find(|k| k.name() == name)
    }

    /// The category every record of this kind carries.
    pub const fn category(self) -> Category {
        match self {
            Kind::Sample => Category::Sampling,
            Kind::Counter => Category::Counters,
            _ => Category::Tracing,
        }
    }

    /// The names of this kind's operations; an operation's value is its
    /// index in this slice.
    pub const fn operations(self) -> &'static [&'static str] {
        match self {
            Kind::Region => REGION_OPERATIONS,
            Kind::Sample => SAMPLE_OPERATIONS,
            Kind::LibraryCall => LIBRARY_CALL_OPERATIONS,
            Kind::Memory => MEMORY_OPERATIONS,
            Kind::Counter => COUNTER_OPERATIONS,
            Kind::Marker => MARKER_OPERATIONS,
            Kind::Xpti => XPTI_OPERATIONS,
        }
    }

    /// How many operations this kind has.
    pub const fn operation_count(self) -> u32 {
        self.operations().len() as u32
    }

    /// The name of `operation`, or `None` when the kind has no such
    /// operation.
    pub fn operation_name(self, operation: u32) -> Option<&'static str> {
        self.operations().get(operation as usize).copied()
    }

    /// The operation whose name is `name`.
    pub fn operation_from_name(self, name: &str) -> Option<u32> {
        self.operations()
            .iter()
            .position(|n| *n == name)
            .map(|i| i as u32)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The name of the kind with numeric value `kind` (seed 001's
/// `query_buffer_tracing_kind_name`).
pub fn kind_name(kind: u32) -> Option<&'static str> {
    Kind::from_u32(kind).map(Kind::name)
}

/// The name of operation `operation` of kind `kind` (seed 001's
/// `query_buffer_tracing_kind_operation_name`).
pub fn operation_name(kind: u32, operation: u32) -> Option<&'static str> {
    Kind::from_u32(kind).and_then(|k| k.operation_name(operation))
}

/// Iterates over every kind, in numeric order (seed 001's
/// `iterate_buffer_tracing_kinds`).
pub fn kinds() -> impl Iterator<Item = Kind> {
    ALL_KINDS.into_iter()
}

/// Iterates over `(operation value, name)` for every operation of `kind`
/// (seed 001's `iterate_buffer_tracing_kind_operations`).
pub fn operations(kind: Kind) -> impl Iterator<Item = (u32, &'static str)> {
    kind.operations()
        .iter()
        .enumerate()
        .map(|(i, n)| (i as u32, *n))
}

/// The [`Kind::Xpti`] operation for an XPTI trace-point type (the low byte
/// of the type; user-defined types map to `user_defined`).
pub fn xpti_operation_for_trace_type(trace_type: u16) -> Option<u32> {
    let code = if trace_type & 0x80 != 0 {
        128
    } else {
        trace_type & 0xff
    };
    XPTI_TRACE_POINT_CODES
        .iter()
        .position(|c| *c == code)
        .map(|i| i as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for kind in kinds() {
            assert_eq!(Kind::from_u32(kind as u32), Some(kind));
            assert_eq!(Kind::from_name(kind.name()), Some(kind));
            assert!(seen.insert(kind.name()));
            let mut ops = std::collections::HashSet::new();
            for (op, name) in operations(kind) {
                assert_eq!(kind.operation_from_name(name), Some(op));
                assert!(ops.insert(name), "duplicate operation {name} in {kind}");
            }
            assert!(kind.operation_count() > 0);
            assert!((kind as usize) < KIND_SLOTS);
        }
        assert_eq!(kind_name(0), None);
        assert_eq!(kind_name(8), None);
        assert_eq!(operation_name(Kind::Memory as u32, 3), Some("free"));
        assert_eq!(operation_name(Kind::Memory as u32, 99), None);
    }

    #[test]
    fn xpti_codes_match_operations() {
        assert_eq!(XPTI_OPERATIONS.len(), XPTI_TRACE_POINT_CODES.len());
        let op = xpti_operation_for_trace_type(9).unwrap();
        assert_eq!(Kind::Xpti.operation_name(op), Some("region_end"));
        let op = xpti_operation_for_trace_type(0x0181).unwrap();
        assert_eq!(Kind::Xpti.operation_name(op), Some("user_defined"));
        assert_eq!(xpti_operation_for_trace_type(1), None);
    }
}
