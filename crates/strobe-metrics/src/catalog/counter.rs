//! What a counter is: its kind, where its value comes from (a perf event,
//! a rusage field, a procfs/sysfs value, a tool counter) and what the
//! catalog says about it.
//!
//! Owns these descriptions and their names only. Never reads a file, never
//! opens an event: [`super::parse`] fills them in from a name, the
//! probes say whether one can be counted, and [`crate::counting`] counts.

use std::fmt;

/// What kind of source a counter comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CounterKind {
    /// perf's generic hardware events (`PERF_TYPE_HARDWARE`): need a
    /// hardware PMU.
    Hardware,
    /// perf's generic cache events (`PERF_TYPE_HW_CACHE`): need a
    /// hardware PMU.
    HardwareCache,
    /// perf's software events (`PERF_TYPE_SOFTWARE`): kernel counters,
    /// available in every VM.
    Software,
    /// A PMU's own encoding: `pmu/terms/`, `pmu/alias/`, `rNNNN`.
    Raw,
    /// A kernel tracepoint counted as an event (`sys:name`).
    Tracepoint,
    /// A field of `getrusage(2)` (or its `/proc` equivalent for another
    /// process).
    Rusage,
    /// A procfs or sysfs value (`/proc/<pid>/status`, `io`, cpufreq).
    Proc,
    /// Computed by strobe itself (`duration_time`).
    Tool,
}

impl CounterKind {
    /// The lower-case name used in listings: `hardware`, `hardware-cache`,
    /// `software`, `raw`, `tracepoint`, `rusage`, `proc`, `tool`.
    pub fn as_str(self) -> &'static str {
        match self {
            CounterKind::Hardware => "hardware",
            CounterKind::HardwareCache => "hardware-cache",
            CounterKind::Software => "software",
            CounterKind::Raw => "raw",
            CounterKind::Tracepoint => "tracepoint",
            CounterKind::Rusage => "rusage",
            CounterKind::Proc => "proc",
            CounterKind::Tool => "tool",
        }
    }

    /// Whether counters of this kind are perf events (opened with
    /// `perf_event_open`, read in groups).
    pub fn is_perf(self) -> bool {
        matches!(
            self,
            CounterKind::Hardware
                | CounterKind::HardwareCache
                | CounterKind::Software
                | CounterKind::Raw
                | CounterKind::Tracepoint
        )
    }
}

impl fmt::Display for CounterKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// One entry of the catalog: a counter that can be named, and whether it
/// can be counted here.
#[derive(Clone, Debug, PartialEq)]
pub struct CounterInfo {
    /// The name to write (`cycles`, `msr/tsc/`, `rusage/user-time/`, ...).
    pub name: String,
    /// Where it comes from.
    pub kind: CounterKind,
    /// One line saying what it counts (aliases are mentioned here).
    pub description: String,
    /// `ns`, `KiB`, `MHz`, `bytes`, a PMU's own unit, or empty for a count.
    pub unit: String,
    /// `Ok` when probing found it countable for this process; otherwise
    /// why not (never empty).
    pub available: Result<(), String>,
}

/// A resolved counter: everything [`crate::counting`] needs to count it.
#[derive(Clone, Debug, PartialEq)]
pub struct CounterSpec {
    /// The canonical name (`cycles`, `cycles:u`, `cpu/event=0x3c/`,
    /// `msr/tsc/`, `sched:sched_switch`, `rusage/user-time/`,
    /// `proc/rss/`, `duration_time`), or the `name=` term's value.
    pub name: String,
    /// Where it comes from.
    pub kind: CounterKind,
    /// The unit of the raw value (see [`CounterInfo::unit`]).
    pub unit: String,
    /// Multiply raw values by this to get `unit`s (a PMU's `.scale`
    /// file; 1 otherwise).
    pub scale: f64,
    /// How to count it.
    pub source: Source,
}

/// How a counter is counted.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// A perf event.
    Perf(PerfEvent),
    /// A `getrusage(2)` field.
    Rusage(RusageField),
    /// A procfs/sysfs value.
    Proc(ProcField),
    /// A counter strobe computes.
    Tool(ToolCounter),
}

/// The `perf_event_attr` fields a perf counter needs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PerfEvent {
    /// The PMU the event belongs to, which decides its group: `cpu` for
    /// perf's generic hardware and cache events and `rNNNN`, `software`,
    /// `tracepoint`, or the sysfs PMU name of `pmu/.../`.
    pub pmu: String,
    /// `perf_event_attr.type`.
    pub type_: u32,
    /// `perf_event_attr.config`.
    pub config: u64,
    /// `perf_event_attr.config1`.
    pub config1: u64,
    /// `perf_event_attr.config2`.
    pub config2: u64,
    /// `perf_event_attr.config3`.
    pub config3: u64,
    /// Do not count user space (`:k`).
    pub exclude_user: bool,
    /// Do not count the kernel: `Some(true)` for `:u`, `Some(false)` for
    /// `:k`/`:uk`, `None` to count it where the system allows.
    pub exclude_kernel: Option<bool>,
}

/// A `getrusage(2)` field. For the calling process or thread it is read
/// with `getrusage`; for another process from `/proc/<pid>/{stat,status,io}`
/// (times at clock-tick resolution) until the caller passes the reaped
/// child's `rusage` to [`crate::counting::Counters::apply_final_rusage`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RusageField {
    /// `ru_utime`, ns.
    UserTime,
    /// `ru_stime`, ns.
    SystemTime,
    /// `ru_maxrss`, KiB (a high-water mark, not a count).
    MaxRss,
    /// `ru_minflt`.
    MinFlt,
    /// `ru_majflt`.
    MajFlt,
    /// `ru_nvcsw`.
    VoluntarySwitches,
    /// `ru_nivcsw`.
    InvoluntarySwitches,
    /// `ru_inblock`, 512-byte blocks.
    InBlock,
    /// `ru_oublock`, 512-byte blocks.
    OuBlock,
}

impl RusageField {
    /// The field's name (`user-time`, ...).
    pub fn name(self) -> &'static str {
        self.names()[0]
    }

    /// The name first, then accepted aliases.
    pub fn names(self) -> &'static [&'static str] {
        match self {
            RusageField::UserTime => &["user-time", "utime"],
            RusageField::SystemTime => &["system-time", "stime"],
            RusageField::MaxRss => &["max-rss", "maxrss"],
            RusageField::MinFlt => &["minflt"],
            RusageField::MajFlt => &["majflt"],
            RusageField::VoluntarySwitches => &["voluntary-switches", "nvcsw"],
            RusageField::InvoluntarySwitches => &["involuntary-switches", "nivcsw"],
            RusageField::InBlock => &["inblock"],
            RusageField::OuBlock => &["oublock"],
        }
    }

    /// The unit of the value.
    pub fn unit(self) -> &'static str {
        match self {
            RusageField::UserTime | RusageField::SystemTime => "ns",
            RusageField::MaxRss => "KiB",
            RusageField::InBlock | RusageField::OuBlock => "blocks",
            _ => "",
        }
    }

    /// A high-water mark read as it is (not a count since enable).
    pub fn is_gauge(self) -> bool {
        self == RusageField::MaxRss
    }

    pub(super) fn description(self) -> &'static str {
        match self {
            RusageField::UserTime => "CPU time in user mode (getrusage ru_utime)",
            RusageField::SystemTime => "CPU time in the kernel (getrusage ru_stime)",
            RusageField::MaxRss => "peak resident set size (getrusage ru_maxrss)",
            RusageField::MinFlt => "page faults served without I/O (getrusage ru_minflt)",
            RusageField::MajFlt => "page faults that needed I/O (getrusage ru_majflt)",
            RusageField::VoluntarySwitches => {
                "voluntary context switches: waits (getrusage ru_nvcsw)"
            }
            RusageField::InvoluntarySwitches => {
                "involuntary context switches: preemptions (getrusage ru_nivcsw)"
            }
            RusageField::InBlock => "filesystem input in 512-byte blocks (getrusage ru_inblock)",
            RusageField::OuBlock => "filesystem output in 512-byte blocks (getrusage ru_oublock)",
        }
    }
}

/// A procfs or sysfs value of the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProcField {
    /// `VmRSS` of `/proc/<pid>/status`, KiB.
    Rss,
    /// `VmSize` of `/proc/<pid>/status`, KiB.
    VmSize,
    /// `Threads` of `/proc/<pid>/status`.
    Threads,
    /// `voluntary_ctxt_switches` of `/proc/<pid>/status` (that task only).
    VoluntaryCtxtSwitches,
    /// `nonvoluntary_ctxt_switches` of `/proc/<pid>/status` (that task only).
    NonvoluntaryCtxtSwitches,
    /// `read_bytes` of `/proc/<pid>/io` (storage reads), bytes.
    ReadBytes,
    /// `write_bytes` of `/proc/<pid>/io` (storage writes), bytes.
    WriteBytes,
    /// The current frequency of the CPU the target last ran on, MHz:
    /// sysfs `cpufreq/scaling_cur_freq`, else `/proc/cpuinfo`'s `cpu MHz`.
    CpuFrequency,
}

impl ProcField {
    /// The field's name (`rss`, ...).
    pub fn name(self) -> &'static str {
        self.names()[0]
    }

    /// The name first, then accepted aliases.
    pub fn names(self) -> &'static [&'static str] {
        match self {
            ProcField::Rss => &["rss", "vm-rss"],
            ProcField::VmSize => &["vm-size"],
            ProcField::Threads => &["threads"],
            ProcField::VoluntaryCtxtSwitches => &["voluntary_ctxt_switches"],
            ProcField::NonvoluntaryCtxtSwitches => &["nonvoluntary_ctxt_switches"],
            ProcField::ReadBytes => &["read_bytes"],
            ProcField::WriteBytes => &["write_bytes"],
            ProcField::CpuFrequency => &["cpu-frequency", "cpu-mhz"],
        }
    }

    /// The unit of the value.
    pub fn unit(self) -> &'static str {
        match self {
            ProcField::Rss | ProcField::VmSize => "KiB",
            ProcField::ReadBytes | ProcField::WriteBytes => "bytes",
            ProcField::CpuFrequency => "MHz",
            _ => "",
        }
    }

    /// A level read as it is (size, thread count, frequency), not a count
    /// since enable.
    pub fn is_gauge(self) -> bool {
        matches!(
            self,
            ProcField::Rss | ProcField::VmSize | ProcField::Threads | ProcField::CpuFrequency
        )
    }

    pub(super) fn description(self) -> &'static str {
        match self {
            ProcField::Rss => "resident set size now (VmRSS of /proc/<pid>/status)",
            ProcField::VmSize => "virtual memory size now (VmSize of /proc/<pid>/status)",
            ProcField::Threads => "number of threads now (Threads of /proc/<pid>/status)",
            ProcField::VoluntaryCtxtSwitches => {
                "voluntary context switches of the target task (/proc/<pid>/status)"
            }
            ProcField::NonvoluntaryCtxtSwitches => {
                "involuntary context switches of the target task (/proc/<pid>/status)"
            }
            ProcField::ReadBytes => "bytes read from storage (read_bytes of /proc/<pid>/io)",
            ProcField::WriteBytes => "bytes written to storage (write_bytes of /proc/<pid>/io)",
            ProcField::CpuFrequency => {
                "frequency of the CPU the target last ran on (sysfs cpufreq or /proc/cpuinfo)"
            }
        }
    }
}

/// A counter strobe computes itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ToolCounter {
    /// Wall-clock nanoseconds while the counters are enabled (perf's
    /// `duration_time`).
    DurationTime,
}

impl ToolCounter {
    /// The counter's name.
    pub fn name(self) -> &'static str {
        match self {
            ToolCounter::DurationTime => "duration_time",
        }
    }
}
