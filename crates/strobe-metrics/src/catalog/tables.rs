//! The fixed part of the catalog: perf's generic hardware, cache and
//! software event names (with perf's aliases), and the rusage, procfs and
//! tool counters strobe adds.
//!
//! Owns names, numbers and one-line descriptions only. Never touches the
//! system: what exists on this machine is probed elsewhere
//! (`catalog::probe`), what the PMUs publish is read from sysfs
//! (`catalog::sysfs`).

use super::{ProcField, RusageField, ToolCounter};

/// `PERF_TYPE_HARDWARE`.
pub(crate) const TYPE_HARDWARE: u32 = 0;
/// `PERF_TYPE_SOFTWARE`.
pub(crate) const TYPE_SOFTWARE: u32 = 1;
/// `PERF_TYPE_TRACEPOINT`.
pub(crate) const TYPE_TRACEPOINT: u32 = 2;
/// `PERF_TYPE_HW_CACHE`.
pub(crate) const TYPE_HW_CACHE: u32 = 3;
/// `PERF_TYPE_RAW`.
pub(crate) const TYPE_RAW: u32 = 4;

/// One generic perf event: perf's name, its aliases, the `config` value
/// (for its `PERF_TYPE_*`), the unit and a description.
pub(crate) struct Generic {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub config: u64,
    pub unit: &'static str,
    pub description: &'static str,
}

/// `PERF_TYPE_HARDWARE` events, in perf's order (`PERF_COUNT_HW_*`).
pub(crate) const HARDWARE: &[Generic] = &[
    Generic {
        name: "cycles",
        aliases: &["cpu-cycles"],
        config: 0,
        unit: "",
        description: "CPU cycles (core clock ticks while the task runs)",
    },
    Generic {
        name: "instructions",
        aliases: &[],
        config: 1,
        unit: "",
        description: "instructions retired",
    },
    Generic {
        name: "cache-references",
        aliases: &[],
        config: 2,
        unit: "",
        description: "cache accesses (usually last-level cache references)",
    },
    Generic {
        name: "cache-misses",
        aliases: &[],
        config: 3,
        unit: "",
        description: "cache misses (usually last-level cache misses)",
    },
    Generic {
        name: "branches",
        aliases: &["branch-instructions"],
        config: 4,
        unit: "",
        description: "branch instructions retired",
    },
    Generic {
        name: "branch-misses",
        aliases: &[],
        config: 5,
        unit: "",
        description: "mispredicted branch instructions",
    },
    Generic {
        name: "bus-cycles",
        aliases: &[],
        config: 6,
        unit: "",
        description: "bus cycles (may differ from the core clock)",
    },
    Generic {
        name: "stalled-cycles-frontend",
        aliases: &["idle-cycles-frontend"],
        config: 7,
        unit: "",
        description: "cycles the front end issued nothing",
    },
    Generic {
        name: "stalled-cycles-backend",
        aliases: &["idle-cycles-backend"],
        config: 8,
        unit: "",
        description: "cycles the back end retired nothing",
    },
    Generic {
        name: "ref-cycles",
        aliases: &[],
        config: 9,
        unit: "",
        description: "reference cycles (constant rate, unaffected by frequency scaling)",
    },
];

/// `PERF_TYPE_SOFTWARE` events (`PERF_COUNT_SW_*`), those worth counting.
pub(crate) const SOFTWARE: &[Generic] = &[
    Generic {
        name: "cpu-clock",
        aliases: &[],
        config: 0,
        unit: "ns",
        description: "CPU time of the task measured by a per-CPU high-resolution timer",
    },
    Generic {
        name: "task-clock",
        aliases: &[],
        config: 1,
        unit: "ns",
        description: "CPU time the task ran (its scheduler clock)",
    },
    Generic {
        name: "page-faults",
        aliases: &["faults"],
        config: 2,
        unit: "",
        description: "page faults, minor and major",
    },
    Generic {
        name: "context-switches",
        aliases: &["cs"],
        config: 3,
        unit: "",
        description: "context switches (the task left the CPU)",
    },
    Generic {
        name: "cpu-migrations",
        aliases: &["migrations"],
        config: 4,
        unit: "",
        description: "moves of the task to another CPU",
    },
    Generic {
        name: "minor-faults",
        aliases: &[],
        config: 5,
        unit: "",
        description: "page faults served without I/O",
    },
    Generic {
        name: "major-faults",
        aliases: &[],
        config: 6,
        unit: "",
        description: "page faults that needed I/O",
    },
    Generic {
        name: "alignment-faults",
        aliases: &[],
        config: 7,
        unit: "",
        description: "alignment faults the kernel fixed up",
    },
    Generic {
        name: "emulation-faults",
        aliases: &[],
        config: 8,
        unit: "",
        description: "instructions the kernel emulated",
    },
    Generic {
        name: "cgroup-switches",
        aliases: &[],
        config: 11,
        unit: "",
        description: "context switches to a task in another cgroup",
    },
];

/// One cache of `PERF_TYPE_HW_CACHE`: perf's name, its id, which
/// operations perf lists for it (bit 0 read, 1 write, 2 prefetch).
pub(crate) struct Cache {
    pub name: &'static str,
    pub id: u64,
    pub ops: u8,
    pub what: &'static str,
}

/// The caches in perf's naming and perf's table of valid operations.
pub(crate) const CACHES: &[Cache] = &[
    Cache {
        name: "L1-dcache",
        id: 0,
        ops: 0b111,
        what: "level-1 data cache",
    },
    Cache {
        name: "L1-icache",
        id: 1,
        ops: 0b101,
        what: "level-1 instruction cache",
    },
    Cache {
        name: "LLC",
        id: 2,
        ops: 0b111,
        what: "last-level cache",
    },
    Cache {
        name: "dTLB",
        id: 3,
        ops: 0b111,
        what: "data TLB",
    },
    Cache {
        name: "iTLB",
        id: 4,
        ops: 0b001,
        what: "instruction TLB",
    },
    Cache {
        name: "branch",
        id: 5,
        ops: 0b001,
        what: "branch prediction unit",
    },
    Cache {
        name: "node",
        id: 6,
        ops: 0b111,
        what: "local memory node",
    },
];

/// Operations: (singular, plural, id, description verb).
pub(crate) const CACHE_OPS: [(&str, &str, u64, &str); 3] = [
    ("load", "loads", 0, "reads"),
    ("store", "stores", 1, "writes"),
    ("prefetch", "prefetches", 2, "prefetches"),
];

/// One hardware cache event as perf names it.
pub(crate) struct CacheEvent {
    pub name: String,
    pub config: u64,
    pub description: String,
}

/// Every cache event perf lists: `<cache>-<ops>` (accesses) and
/// `<cache>-<op>-misses`, config = id | op << 8 | result << 16.
pub(crate) fn cache_events() -> Vec<CacheEvent> {
    let mut out = Vec::new();
    for cache in CACHES {
        for (bit, (op, ops, op_id, verb)) in CACHE_OPS.iter().enumerate() {
            if cache.ops & (1 << bit) == 0 {
                continue;
            }
            out.push(CacheEvent {
                name: format!("{}-{}", cache.name, ops),
                config: cache.id | (op_id << 8),
                description: format!("{} {verb}", cache.what),
            });
            out.push(CacheEvent {
                name: format!("{}-{}-misses", cache.name, op),
                config: cache.id | (op_id << 8) | (1 << 16),
                description: format!("{} {verb} that missed", cache.what),
            });
        }
    }
    out
}

/// Every rusage field, in `struct rusage` order.
pub(crate) const RUSAGE: &[RusageField] = &[
    RusageField::UserTime,
    RusageField::SystemTime,
    RusageField::MaxRss,
    RusageField::MinFlt,
    RusageField::MajFlt,
    RusageField::VoluntarySwitches,
    RusageField::InvoluntarySwitches,
    RusageField::InBlock,
    RusageField::OuBlock,
];

/// Every procfs/sysfs value.
pub(crate) const PROC: &[ProcField] = &[
    ProcField::Rss,
    ProcField::VmSize,
    ProcField::Threads,
    ProcField::VoluntaryCtxtSwitches,
    ProcField::NonvoluntaryCtxtSwitches,
    ProcField::ReadBytes,
    ProcField::WriteBytes,
    ProcField::CpuFrequency,
];

/// Every tool counter.
pub(crate) const TOOL: &[ToolCounter] = &[ToolCounter::DurationTime];
