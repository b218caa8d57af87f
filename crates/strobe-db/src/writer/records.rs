//! What callers hand the writer and get back: row ids and record
//! descriptions.
//!
//! Owns the typed row ids the writer returns ([`StringId`], [`ThreadRef`],
//! [`FrameId`], …), the descriptions of what it appends (threads, modules,
//! stack frames, regions, samples, counters, agents, memory operations,
//! causal experiments, clock comparisons), its options and its totals. It
//! never touches a database: the writer's other files write these.

use std::time::Duration;

use crate::identity::NodeInfo;

/// Row id of an interned string (`rocpd_string.id`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StringId(pub i64);
/// Row id of a thread (`rocpd_info_thread.id`), not the OS tid.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ThreadRef(pub i64);
/// Row id of a track (`rocpd_track.id`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TrackId(pub i64);
/// Row id of an event (`rocpd_event.id`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventId(pub i64);
/// Row id of a loaded module (`strobe_module.id`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ModuleId(pub i64);
/// Row id of an interned frame (`strobe_frame.id`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FrameId(pub i64);
/// Row id of an interned call site (`strobe_callsite.id`): a stack.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallSiteId(pub i64);
/// Row id of a counter description (`rocpd_info_pmc.id`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CounterId(pub i64);

/// Row id of an agent (`rocpd_info_agent.id`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AgentId(pub i64);

/// Kind of agent (`rocpd_info_agent.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentKind {
    /// A CPU (socket or the whole host).
    Cpu,
    /// A GPU.
    Gpu,
}

/// Description of a compute agent (`rocpd_info_agent`).
#[derive(Debug, Clone)]
pub struct AgentInfo<'a> {
    /// CPU or GPU.
    pub kind: AgentKind,
    /// Index among all agents.
    pub absolute_index: u32,
    /// Index as the runtime numbers them.
    pub logical_index: u32,
    /// Index among agents of the same kind.
    pub type_index: u32,
    /// Short name, e.g. `cpu0`.
    pub name: &'a str,
    /// Model name, e.g. from `/proc/cpuinfo`.
    pub model_name: Option<&'a str>,
    /// Vendor name.
    pub vendor_name: Option<&'a str>,
    /// Product name.
    pub product_name: Option<&'a str>,
}

/// Memory operation kind (`rocpd_memory_allocate.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocOp {
    /// Allocation.
    Alloc,
    /// Release.
    Free,
    /// Reallocation.
    Realloc,
    /// Reclaim.
    Reclaim,
}

/// Memory level (`rocpd_memory_allocate.level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemLevel {
    /// Real (resident) memory, e.g. malloc.
    Real,
    /// Virtual address space, e.g. mmap.
    Virtual,
    /// GPU scratch memory.
    Scratch,
}

/// A memory allocation or release (`rocpd_memory_allocate` + its event).
#[derive(Debug, Clone, Copy)]
pub struct MemoryOp {
    /// Thread that performed it.
    pub thread: ThreadRef,
    /// Alloc, free, realloc or reclaim.
    pub op: AllocOp,
    /// Real, virtual or scratch.
    pub level: MemLevel,
    /// Start of the call (ns).
    pub start_ns: u64,
    /// End of the call (ns).
    pub end_ns: u64,
    /// Address returned or released.
    pub address: u64,
    /// Size in bytes (0 for a free of unknown size).
    pub size: u64,
    /// Agent owning the memory, if recorded.
    pub agent: Option<AgentId>,
    /// Category (e.g. `malloc`), if any.
    pub category: Option<StringId>,
    /// Call stack of the call, if captured.
    pub stack: Option<CallSiteId>,
}

/// One frame of a sampled call stack as the sampler produces it: the module
/// it falls in (`None` when no module covers the address; `rel_pc` is then
/// the absolute address) and the pc relative to the module's load address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackFrame {
    /// Module row id from [`Writer::add_module`](super::Writer::add_module).
    pub module: Option<ModuleId>,
    /// Program counter relative to the module's load address.
    pub rel_pc: u64,
}

/// One word per frame (the derived hash wrote three): whole stacks are
/// hashed for every sample the writer stores.
impl std::hash::Hash for StackFrame {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let module = self.module.map_or(u64::MAX, |m| m.0 as u64);
        state.write_u64(self.rel_pc ^ module.rotate_left(40));
    }
}

/// How the writer batches and flushes.
#[derive(Debug, Clone)]
pub struct WriterOptions {
    /// Rows per transaction before a commit (default 20 000). Bounds the
    /// rows SQLite keeps dirty between commits.
    pub batch_rows: usize,
    /// Longest time rows stay uncommitted (default 1 s): a killed process
    /// loses at most this much. Checked on appends and [`Writer::maybe_flush`](super::Writer::maybe_flush).
    pub flush_interval: Duration,
    /// SQLite page cache in KiB (default 8 MiB). Bounds the writer's memory.
    pub cache_kib: u32,
    /// The node description; `None` reads it with [`NodeInfo::detect`].
    pub node: Option<NodeInfo>,
    /// Settings to record in `strobe_settings` (name, value).
    pub settings: Vec<(String, String)>,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            batch_rows: 20_000,
            flush_interval: Duration::from_secs(1),
            cache_kib: 8 * 1024,
            node: None,
            settings: Vec::new(),
        }
    }
}

/// Description of a thread (`rocpd_info_thread`).
#[derive(Debug, Clone, Default)]
pub struct ThreadInfo<'a> {
    /// OS thread id.
    pub tid: u32,
    /// Thread name, if known.
    pub name: Option<&'a str>,
    /// Thread start (monotonic ns), if known.
    pub start_ns: Option<u64>,
}

/// Description of a loaded module (`strobe_module`).
#[derive(Debug, Clone, Default)]
pub struct ModuleRow<'a> {
    /// File path of the mapped object.
    pub path: &'a str,
    /// GNU build id in hex, if the object has one.
    pub build_id: Option<&'a str>,
    /// Address the module is loaded at (start of its first mapping).
    pub load_address: u64,
    /// Size of the mapped range in bytes.
    pub size: u64,
    /// File offset of the first mapping.
    pub file_offset: u64,
    /// When it was loaded (monotonic ns), if known.
    pub load_ns: Option<u64>,
}

/// Description of a counter (`rocpd_info_pmc`, target CPU).
#[derive(Debug, Clone, Default)]
pub struct CounterInfo<'a> {
    /// Counter name, e.g. `task-clock`.
    pub name: &'a str,
    /// Short description.
    pub description: Option<&'a str>,
    /// Unit, e.g. `ns`, `count`.
    pub units: Option<&'a str>,
    /// Where it comes from, e.g. `perf_event`, `rusage`.
    pub component: Option<&'a str>,
    /// `true` for accumulating counters (`ACCUM`), else absolute (`ABS`).
    pub accumulating: bool,
    /// Derivation expression for derived metrics.
    pub expression: Option<&'a str>,
}

/// A derived-metric definition a run used (`strobe_metric`).
#[derive(Debug, Clone, Default)]
pub struct MetricRow<'a> {
    /// The name requests use.
    pub name: &'a str,
    /// `metric` (an expression) or `counter` (a named event of a PMU
    /// block that metrics refer to).
    pub kind: &'a str,
    /// A metric's expression as written; a counter's event spec.
    pub expression: &'a str,
    /// Unit of its values.
    pub unit: Option<&'a str>,
    /// What it measures.
    pub description: Option<&'a str>,
    /// Whether it was asked for (else only referred to by one that was).
    pub requested: bool,
}

/// What a causal-profiling progress point measures
/// (`strobe_causal_progress.kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProgressKind {
    /// A point visited each time a unit of work completes (Coz's
    /// `COZ_PROGRESS`): its rate is the program's throughput.
    Throughput,
    /// A begin/end pair (Coz's `COZ_BEGIN`/`COZ_END`): the time between
    /// them is a latency.
    Latency,
    /// The whole run: one visit at its end (end-to-end mode).
    EndToEnd,
}

impl ProgressKind {
    /// The text stored in the database: `throughput`, `latency` or
    /// `end-to-end`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProgressKind::Throughput => "throughput",
            ProgressKind::Latency => "latency",
            ProgressKind::EndToEnd => "end-to-end",
        }
    }

    /// The kind stored as `s` (see [`ProgressKind::as_str`]), if known.
    pub fn from_name(s: &str) -> Option<ProgressKind> {
        match s {
            "throughput" => Some(ProgressKind::Throughput),
            "latency" => Some(ProgressKind::Latency),
            "end-to-end" => Some(ProgressKind::EndToEnd),
            _ => None,
        }
    }
}

impl std::fmt::Display for ProgressKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one progress point counted during one causal experiment
/// (`strobe_causal_progress`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CausalProgress {
    /// The progress point's name.
    pub name: String,
    /// Throughput, latency or end-to-end.
    pub kind: ProgressKind,
    /// Throughput: visits during the experiment; latency: arrivals (begins)
    /// during it; end-to-end: 1.
    pub visits: u64,
    /// Latency: departures (ends) during the experiment; otherwise 0.
    pub departures: u64,
    /// Latency: begins minus ends counted since the program started, at the
    /// experiment's end (Coz's `difference`); otherwise 0.
    pub in_flight: i64,
}

/// One causal-profiling experiment (`strobe_causal_experiment`) with what
/// its progress points counted.
#[derive(Debug, Clone, PartialEq)]
pub struct CausalExperiment {
    /// Label of the configuration variant (`""` when there is only one).
    pub variant: String,
    /// `line`, `function` or `end-to-end`.
    pub mode: String,
    /// What was virtually sped up: `path/to/file.c:42` in line mode, the
    /// function name in function mode, `""` for an end-to-end baseline.
    pub selection: String,
    /// The selection's source file, when known.
    pub file: Option<String>,
    /// The selection's source line, when known.
    pub line: Option<u32>,
    /// The selection's function, when known.
    pub function: Option<String>,
    /// Virtual speedup, 0.0 to 1.0.
    pub speedup: f64,
    /// `CLOCK_MONOTONIC` ns at the start.
    pub start_ns: u64,
    /// Effective duration in ns: wall time minus the delay inserted
    /// (Coz's `duration`).
    pub duration_ns: u64,
    /// Delay inserted during the experiment in ns (the change of the
    /// global delay count).
    pub delay_ns: u64,
    /// Samples that fell in the selection during the experiment.
    pub selected_samples: u64,
    /// The sampling period in ns.
    pub period_ns: u64,
    /// One entry per progress point.
    pub progress: Vec<CausalProgress>,
}

/// One argument attached to an event (`rocpd_arg`).
#[derive(Debug, Clone, Copy)]
pub struct Arg<'a> {
    /// Argument name.
    pub name: &'a str,
    /// Type name as text, e.g. `int`, `str`.
    pub ty: &'a str,
    /// Value as text.
    pub value: &'a str,
}

/// One clock comparison (a `strobe_clock_sync` row).
#[derive(Debug, Clone, Copy)]
pub struct ClockSync<'a> {
    /// `init` or `finalize`.
    pub phase: &'a str,
    /// This process's `CLOCK_MONOTONIC` at the comparison.
    pub local_ns: u64,
    /// The reference's clock minus this process's.
    pub offset_ns: i64,
    /// The round trip of the exchange.
    pub rtt_ns: u64,
    /// The reference process's MPI rank.
    pub reference_rank: i32,
}

/// A timed region on one thread (`rocpd_region` + its `rocpd_event`).
#[derive(Debug, Clone, Copy)]
pub struct Region<'a> {
    /// Thread the region ran on.
    pub thread: ThreadRef,
    /// Start (monotonic ns).
    pub start_ns: u64,
    /// End (monotonic ns), `>= start_ns`.
    pub end_ns: u64,
    /// Region name.
    pub name: StringId,
    /// Category (e.g. `user`, `pthread`), if any.
    pub category: Option<StringId>,
    /// Call stack where the region began, if captured.
    pub stack: Option<CallSiteId>,
    /// Correlation id linking related events, if any.
    pub correlation_id: Option<u64>,
    /// Arguments (`rocpd_arg` rows).
    pub args: &'a [Arg<'a>],
}

/// The exact statistics of one thread's regions of one name
/// (`strobe_region_stats`), see [`Writer::set_region_stats`](super::Writer::set_region_stats).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionStats {
    /// The thread.
    pub thread: ThreadRef,
    /// The regions' name.
    pub name: StringId,
    /// Completed regions.
    pub calls: u64,
    /// Their summed durations (ns).
    pub total_ns: u64,
    /// The same less the time of regions nested in them (ns).
    pub self_ns: u64,
    /// How many of them `rocpd_region` holds.
    pub kept: u64,
    /// The summed durations of those (ns).
    pub kept_ns: u64,
}

/// What a call-stack sample measured; stored as the category of its event
/// (the `category` column of the `samples` view).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SampleKind {
    /// CPU time: a CPU-time timer or the kernel's task clock (`sample`).
    Cpu = 0,
    /// Wall-clock time: a real-time timer, running or not (`wall_sample`).
    Wall = 1,
    /// Time the thread spent blocked, sampled where it blocked (`off_cpu`).
    OffCpu = 2,
}

impl SampleKind {
    /// Number of kinds.
    pub const COUNT: usize = 3;

    /// The event category string of this kind.
    pub fn category(self) -> &'static str {
        match self {
            SampleKind::Cpu => "sample",
            SampleKind::Wall => "wall_sample",
            SampleKind::OffCpu => "off_cpu",
        }
    }
}

/// When a sample was taken, what it measured and how much time it stands
/// for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleMeta {
    /// When (ns, the run's clock).
    pub timestamp_ns: u64,
    /// What it measured.
    pub kind: SampleKind,
    /// The time it stands for (ns): the sampling period times the timer
    /// expirations it represents, or the blocked time of an off-CPU sample.
    pub weight_ns: u64,
}

impl SampleMeta {
    /// A CPU-time sample at `timestamp_ns` standing for `weight_ns`.
    pub fn cpu(timestamp_ns: u64, weight_ns: u64) -> SampleMeta {
        SampleMeta {
            timestamp_ns,
            kind: SampleKind::Cpu,
            weight_ns,
        }
    }
}

/// A correction of sample weights found at the end of a run: the samples
/// of `kind` on `track` taken up to `until_ns` weigh `numerator /
/// denominator` times what they were written with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WeightScale {
    /// The thread's sample track.
    pub track: TrackId,
    /// Which of its samples.
    pub kind: SampleKind,
    /// Samples after this time are left alone (ns).
    pub until_ns: u64,
    /// Multiplier numerator.
    pub numerator: u64,
    /// Multiplier denominator (0 counts as 1).
    pub denominator: u64,
}

/// Totals written by [`Writer::finish`](super::Writer::finish).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriterTotals {
    /// Rows appended, all tables together.
    pub rows: u64,
    /// Regions appended.
    pub regions: u64,
    /// Samples appended.
    pub samples: u64,
    /// Counter samples appended.
    pub counter_samples: u64,
    /// Commits made.
    pub commits: u64,
}
