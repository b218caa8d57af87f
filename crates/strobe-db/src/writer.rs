//! The streaming writer: one profile database per process.
//!
//! Owns creating a database file (tables, views, metadata, process and node
//! rows) and appending records to it in batched transactions: typed append
//! calls for threads, tracks, strings, events, args, regions, samples with
//! call stacks, modules, counters and counter samples, causal-profiling
//! experiments and their in-scope samples, plus the symbolization update of
//! frames. Memory is bounded by the interning caches (distinct
//! values only) and SQLite's page cache, never by run length. It never starts
//! a thread and never creates an index; the owner calls [`Writer::maybe_flush`]
//! (or appends) often enough for the periodic flush to happen.
//!
//! File lifecycle: the file is created exclusively (an existing file is never
//! reused, so two writers can never share one) with mode 0644 whatever the
//! umask, written in WAL mode, and left by [`Writer::finish`] in
//! rollback-journal mode with the WAL checkpointed and removed, so a finished
//! profile is one plain file with nothing beside it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::{params, Connection, OpenFlags, OptionalExtension, Statement};

use crate::bulk::{self, Bulk};
use crate::error::{DbError, Result, SqlContext};
use crate::identity::{NodeInfo, ProcessUuid};
use crate::intern::InternCaches;
use crate::process::ProcessInfo;
use crate::schema::{self, TableSet, ViewWindow};

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
    /// Module row id from [`Writer::add_module`].
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
    /// loses at most this much. Checked on appends and [`Writer::maybe_flush`].
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
/// (`strobe_region_stats`), see [`Writer::set_region_stats`].
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

/// Totals written by [`Writer::finish`].
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

/// Symbol information for one frame, from symbolization after the run.
#[derive(Debug, Clone, Default)]
pub struct FrameSymbols<'a> {
    /// The frame to update.
    pub frame: FrameId,
    /// Function name (demangled), if resolved.
    pub function: Option<&'a str>,
    /// Source file, if known.
    pub file: Option<&'a str>,
    /// Source line, if known.
    pub line: Option<u32>,
}

/// The writer's prepared statements, one per insert kind, and the
/// multi-row inserts of the two tables that take most rows.
struct Stmts {
    /// `rocpd_region`: tid, start, end, name_id, event_id (nid and pid are
    /// the process's, written into the statement).
    regions: Bulk<5>,
    /// `rocpd_sample`: track_id, timestamp, event_id, weight (ns; stored as
    /// `{"weight_ns":N}` in extdata).
    samples: Bulk<4>,
    string: Statement<'static>,
    thread: Statement<'static>,
    thread_end: Statement<'static>,
    track: Statement<'static>,
    event: Statement<'static>,
    arg: Statement<'static>,
    module: Statement<'static>,
    frame: Statement<'static>,
    callsite: Statement<'static>,
    pmc: Statement<'static>,
    pmc_event: Statement<'static>,
    counter: Statement<'static>,
    memory: Statement<'static>,
    begin: Statement<'static>,
    commit: Statement<'static>,
}

impl Stmts {
    /// Prepares every statement on `conn` for the tables of suffix `s`.
    ///
    /// # Safety
    ///
    /// The statements borrow `conn` for `'static`: the caller must keep the
    /// connection at a fixed address (boxed) and drop the statements before it.
    unsafe fn new(conn: &Connection, s: &str, nid: i64, proc_row: i64) -> rusqlite::Result<Stmts> {
        fn keep(st: Statement<'_>) -> Statement<'static> {
            // SAFETY: see `Stmts::new`: the connection outlives the statement
            // and never moves (it lives in a Box owned by the same Writer,
            // declared after `stmts` so it is dropped after them).
            unsafe { bulk::keep(st) }
        }
        Ok(Stmts {
            string: keep(conn.prepare(&format!("INSERT INTO \"rocpd_string{s}\" (string) VALUES (?1)"))?),
            thread: keep(conn.prepare(&format!("INSERT INTO \"rocpd_info_thread{s}\" (nid, ppid, pid, tid, name, start) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"))?),
            thread_end: keep(conn.prepare(&format!("UPDATE \"rocpd_info_thread{s}\" SET \"end\" = ?2 WHERE id = ?1"))?),
            track: keep(conn.prepare(&format!("INSERT INTO \"rocpd_track{s}\" (nid, pid, tid, name_id) VALUES (?1, ?2, ?3, ?4)"))?),
            event: keep(conn.prepare(&format!("INSERT INTO \"rocpd_event{s}\" (category_id, stack_id, correlation_id) VALUES (?1, ?2, ?3)"))?),
            arg: keep(conn.prepare(&format!("INSERT INTO \"rocpd_arg{s}\" (event_id, position, type, name, value) VALUES (?1, ?2, ?3, ?4, ?5)"))?),
            module: keep(conn.prepare(&format!("INSERT INTO \"strobe_module{s}\" (pid, path, build_id, load_address, size, file_offset, load_time) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"))?),
            frame: keep(conn.prepare(&format!("INSERT INTO \"strobe_frame{s}\" (module_id, rel_pc) VALUES (?1, ?2)"))?),
            callsite: keep(conn.prepare(&format!("INSERT INTO \"strobe_callsite{s}\" (parent_id, frame_id, depth) VALUES (?1, ?2, ?3)"))?),
            pmc: keep(conn.prepare(&format!("INSERT INTO \"rocpd_info_pmc{s}\" (nid, pid, agent_id, target_arch, name, symbol, description, component, units, value_type, expression, is_constant, is_derived) VALUES (?1, ?2, ?10, 'CPU', ?3, ?3, ?4, ?5, ?6, ?7, ?8, 0, ?9)"))?),
            pmc_event: keep(conn.prepare(&format!("INSERT INTO \"rocpd_pmc_event{s}\" (event_id, pmc_id, value) VALUES (?1, ?2, ?3)"))?),
            counter: keep(conn.prepare(&format!("INSERT INTO \"strobe_counter_sample{s}\" (pmc_id, track_id, timestamp, value) VALUES (?1, ?2, ?3, ?4)"))?),
            memory: keep(conn.prepare(&format!("INSERT INTO \"rocpd_memory_allocate{s}\" (nid, pid, tid, agent_id, type, level, start, \"end\", address, size, event_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"))?),
            // SAFETY: as for `keep` above.
            regions: unsafe {
                Bulk::new(
                    conn,
                    &format!("rocpd_region{s}"),
                    "nid, pid, tid, start, \"end\", name_id, event_id",
                    &format!("({nid}, {proc_row}, ?, ?, ?, ?, ?)"),
                )?
            },
            // SAFETY: as for `keep` above.
            samples: unsafe {
                Bulk::new(
                    conn,
                    &format!("rocpd_sample{s}"),
                    "track_id, timestamp, event_id, extdata",
                    "(?, ?, ?, ?)",
                )?
                .with_last_as_text(weight_json)
            },
            begin: keep(conn.prepare("BEGIN")?),
            commit: keep(conn.prepare("COMMIT")?),
        })
    }
}

/// A sample's `extdata`: `{"weight_ns":N}`.
fn weight_json(out: &mut String, weight_ns: i64) {
    use std::fmt::Write;
    let _ = write!(out, "{{\"weight_ns\":{weight_ns}}}");
}

/// Timestamps are stored as SQLite INTEGER (i64); u64 nanoseconds fit until
/// the year 2262, and pcs above 2^63 keep their bits.
#[inline]
fn i(v: u64) -> i64 {
    v as i64
}

/// The streaming writer of one process database.
///
/// Create it with [`Writer::create`], append from one thread (it is `Send`,
/// not `Sync`), call [`Writer::maybe_flush`] from the owner's loop when idle,
/// and end with [`Writer::finish`]. Rows are committed every
/// [`WriterOptions::batch_rows`] rows or [`WriterOptions::flush_interval`],
/// whichever comes first; committed rows are visible to readers in other
/// processes (WAL mode) and survive the writer being killed.
pub struct Writer {
    /// Declared first: dropped before `conn`, which they borrow.
    stmts: Stmts,
    path: PathBuf,
    suffix: String,
    guid: String,
    nid: i64,
    proc_row: i64,
    ppid: u32,
    opts: WriterOptions,
    caches: InternCaches,
    in_tx: bool,
    rows_in_tx: usize,
    last_commit: Instant,
    sample_categories: [Option<i64>; SampleKind::COUNT],
    /// The CPU agent counters refer to, once added.
    cpu_agent: Option<AgentId>,
    /// The event row shared by every sample with the same call stack
    /// (samples carry no per-sample event data): call site → event id.
    /// Grows with the distinct stacks, like the call-site cache.
    sample_events: std::collections::HashMap<(usize, i64), i64>,
    /// The event row shared by every region of a category that has no
    /// args, stack or correlation id ([`Writer::append_region_shared`]):
    /// (category id (0 for none), event id); a handful of categories, so a
    /// scan beats hashing.
    region_events: Vec<(i64, i64)>,
    totals: WriterTotals,
    finished: bool,
    /// Boxed so its address never changes while `stmts` borrow it.
    conn: Box<Connection>,
}

impl Writer {
    /// Creates a new database at `path` for `process`: all rocpd and strobe
    /// tables with the process's uuid suffix, the unsuffixed and standard
    /// views, metadata, the node and process rows.
    ///
    /// The file is created exclusively (`O_CREAT|O_EXCL`): if anything
    /// exists at `path` (a file, a dangling symlink), this fails with a
    /// [`DbError::Io`] of kind [`std::io::ErrorKind::AlreadyExists`] and
    /// touches nothing, so a profile is never overwritten and two writers
    /// never share a file. Use [`Writer::create_unique`] to pick a free name
    /// instead. The new file gets mode 0644 whatever the process umask. If
    /// creation fails after the file was made, the file is removed again.
    pub fn create(
        path: impl AsRef<Path>,
        process: &ProcessInfo,
        opts: WriterOptions,
    ) -> Result<Writer> {
        let path = path.as_ref().to_path_buf();
        create_exclusive(&path)?;
        Writer::initialize(path.clone(), process, opts).inspect_err(|_| {
            // The file is ours (created exclusively above) and unusable:
            // remove it and whatever SQLite left beside it.
            for suffix in ["", "-wal", "-shm", "-journal"] {
                let mut p = path.clone().into_os_string();
                p.push(suffix);
                let _ = std::fs::remove_file(p);
            }
        })
    }

    /// Creates a new database at `path`, or, when something already exists
    /// there, at the first free name among `<stem>.1.<ext>`,
    /// `<stem>.2.<ext>`, … (`out/1234.db`, `out/1234.1.db`, `out/1234.2.db`,
    /// …). Each candidate is created exclusively, so concurrent callers (two
    /// processes with the same pid on different hosts sharing a directory, a
    /// pid reused within one run) always get different files. The chosen
    /// path is [`Writer::path`]. Otherwise exactly like [`Writer::create`].
    /// Gives up after 10 000 names.
    pub fn create_unique(
        path: impl AsRef<Path>,
        process: &ProcessInfo,
        opts: WriterOptions,
    ) -> Result<Writer> {
        let base = path.as_ref();
        let stem = base
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let ext = base
            .extension()
            .map(|e| format!(".{}", e.to_string_lossy()))
            .unwrap_or_default();
        const TRIES: u32 = 10_000;
        for n in 0..TRIES {
            let candidate = if n == 0 {
                base.to_path_buf()
            } else {
                base.with_file_name(format!("{stem}.{n}{ext}"))
            };
            match Writer::create(&candidate, process, opts.clone()) {
                Err(DbError::Io { error, .. })
                    if error.kind() == std::io::ErrorKind::AlreadyExists => {}
                other => return other,
            }
        }
        Err(DbError::Io {
            path: base.to_path_buf(),
            error: std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!("{TRIES} files named like this already exist; choose another output directory or clean this one"),
            ),
        })
    }

    /// Fills the freshly created, empty file at `path`.
    fn initialize(path: PathBuf, process: &ProcessInfo, opts: WriterOptions) -> Result<Writer> {
        let node = opts.node.clone().unwrap_or_else(NodeInfo::detect);
        let uuid = ProcessUuid::new(
            &node.machine_id,
            process.pid,
            process.ppid,
            process.start_unix_ns,
        );
        let suffix = uuid.suffix();
        let guid = uuid.guid();
        // No SQLITE_OPEN_CREATE: the file was just made by create_exclusive.
        let conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .at(&path)?;
        conn.execute_batch(&format!(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA cache_size=-{};",
            opts.cache_kib
        ))
        .at(&path)?;
        conn.set_prepared_statement_cache_capacity(64);
        conn.execute_batch("BEGIN").at(&path)?;
        schema::create_tables(&conn, &suffix, &guid).at(&path)?;
        schema::create_views(
            &conn,
            &[TableSet {
                schema: "main".into(),
                suffix: suffix.clone(),
            }],
            false,
            &ViewWindow::default(),
        )
        .at(&path)?;
        let s = &suffix;
        // AUTOINCREMENT looks its table up in sqlite_sequence by scanning
        // from the first row on every insert: seed the rows so the hottest
        // tables come first.
        let hot = [
            "rocpd_event",
            "rocpd_sample",
            "rocpd_region",
            "rocpd_arg",
            "strobe_counter_sample",
            "strobe_callsite",
            "strobe_frame",
            "rocpd_string",
        ];
        for t in hot
            .iter()
            .copied()
            .chain(schema::all_tables().filter(|t| !hot.contains(t) && *t != "rocpd_metadata"))
        {
            conn.execute(
                "INSERT INTO sqlite_sequence (name, seq) VALUES (?1, 0)",
                [format!("{t}{s}")],
            )
            .at(&path)?;
        }
        conn.execute(
            &format!("INSERT INTO \"rocpd_info_node{s}\" (hash, machine_id, system_name, hostname, release, version, hardware_name, domain_name) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"),
            params![node.hash(), node.machine_id, node.system_name, node.hostname, node.release, node.version, node.hardware_name, node.domain_name],
        )
        .at(&path)?;
        let nid = conn.last_insert_rowid();
        let env: serde_json::Map<String, serde_json::Value> = process
            .environment
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect();
        conn.execute(
            &format!("INSERT INTO \"rocpd_info_process{s}\" (nid, ppid, pid, init, start, command, environment) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"),
            params![nid, process.ppid, process.pid, i(process.init_ns), i(process.start_ns), process.command, serde_json::Value::Object(env).to_string()],
        )
        .at(&path)?;
        let proc_row = conn.last_insert_rowid();
        {
            let mut st = conn
                .prepare(&format!(
                    "INSERT INTO \"strobe_settings{s}\" (name, value) VALUES (?1, ?2)"
                ))
                .at(&path)?;
            st.execute(params!["strobe_version", env!("CARGO_PKG_VERSION")])
                .at(&path)?;
            // The clocks read together, so that converters can align this
            // process's monotonic timestamps with other processes and nodes.
            let clocks = strobe_core::clock::ClockSnapshot::take();
            for (name, ns) in [
                ("clock.monotonic_ns", clocks.monotonic_ns),
                ("clock.realtime_ns", clocks.realtime_ns),
                ("clock.boottime_ns", clocks.boottime_ns),
            ] {
                st.execute(params![name, ns.to_string()]).at(&path)?;
            }
            for (k, v) in &opts.settings {
                st.execute(params![k, v]).at(&path)?;
            }
        }
        conn.execute_batch("COMMIT").at(&path)?;
        let conn = Box::new(conn);
        // SAFETY: `conn` is boxed and moved into the Writer together with
        // the statements; `stmts` is declared before `conn`, so it is
        // dropped first.
        let stmts = unsafe { Stmts::new(&conn, &suffix, nid, proc_row) }.at(&path)?;
        Ok(Writer {
            stmts,
            conn,
            path,
            suffix,
            guid,
            nid,
            proc_row,
            ppid: process.ppid,
            opts,
            caches: InternCaches::default(),
            in_tx: false,
            rows_in_tx: 0,
            last_commit: Instant::now(),
            sample_categories: [None; SampleKind::COUNT],
            cpu_agent: None,
            sample_events: std::collections::HashMap::new(),
            region_events: Vec::new(),
            totals: WriterTotals::default(),
            finished: false,
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// The table suffix of this process (`_` + uuid with `_`).
    pub fn suffix(&self) -> &str {
        &self.suffix
    }
    /// The dashed uuid stored in every row's `guid`.
    pub fn guid(&self) -> &str {
        &self.guid
    }
    /// Number of interned (strings, frames, call sites, whole stacks) held
    /// in memory. The first three grow with distinct values only; the last
    /// is capped at 16 384.
    pub fn cache_sizes(&self) -> (usize, usize, usize, usize) {
        self.caches.sizes()
    }
    /// Rows appended and not yet committed.
    pub fn pending_rows(&self) -> usize {
        self.rows_in_tx
    }
    /// Totals so far.
    pub fn totals(&self) -> &WriterTotals {
        &self.totals
    }

    #[inline]
    fn begin_row(&mut self) -> Result<()> {
        if !self.in_tx {
            self.stmts.begin.execute([]).at(&self.path)?;
            self.in_tx = true;
        }
        Ok(())
    }

    #[inline]
    fn end_row(&mut self, rows: usize) -> Result<()> {
        self.rows_in_tx += rows;
        self.totals.rows += rows as u64;
        if self.rows_in_tx >= self.opts.batch_rows
            || (self.rows_in_tx % 1024 < rows
                && self.last_commit.elapsed() >= self.opts.flush_interval)
        {
            self.flush()?;
        }
        Ok(())
    }

    /// Commits every appended row now. After it returns, other processes
    /// see the rows and a crash cannot lose them.
    pub fn flush(&mut self) -> Result<()> {
        if self.in_tx {
            self.flush_bulk()?;
            self.stmts.commit.execute([]).at(&self.path)?;
            self.in_tx = false;
            self.totals.commits += 1;
        }
        self.rows_in_tx = 0;
        self.last_commit = Instant::now();
        Ok(())
    }

    /// Inserts the rows the multi-row inserts still hold (before a commit,
    /// or before a statement that reads or changes their tables).
    fn flush_bulk(&mut self) -> Result<()> {
        self.stmts.regions.flush().at(&self.path)?;
        self.stmts.samples.flush().at(&self.path)
    }

    /// Commits if the flush interval has passed since the last commit. Call
    /// it from the owner's loop when no records arrive, so the last rows are
    /// never held longer than the interval. Cheap when there is nothing to do.
    pub fn maybe_flush(&mut self) -> Result<bool> {
        if self.in_tx && self.last_commit.elapsed() >= self.opts.flush_interval {
            self.flush()?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Interns a string: returns the id of `s` in `rocpd_string`, inserting
    /// it the first time. The cache keeps one copy per distinct string.
    pub fn intern_string(&mut self, s: &str) -> Result<StringId> {
        if let Some(id) = self.caches.string(s) {
            return Ok(StringId(id));
        }
        self.begin_row()?;
        {
            let st = &mut self.stmts.string;
            st.execute([s])
        }
        .at(&self.path)?;
        let id = self.conn.last_insert_rowid();
        self.caches.add_string(s, id);
        self.end_row(1)?;
        Ok(StringId(id))
    }

    /// Adds a thread; returns its row id (use it, not the tid, everywhere).
    pub fn add_thread(&mut self, t: &ThreadInfo<'_>) -> Result<ThreadRef> {
        self.begin_row()?;
        {
            let st = &mut self.stmts.thread;
            {
                st.execute(params![
                    self.nid,
                    self.ppid,
                    self.proc_row,
                    t.tid,
                    t.name,
                    t.start_ns.map(i)
                ])
            }
        }
        .at(&self.path)?;
        let id = self.conn.last_insert_rowid();
        self.end_row(1)?;
        Ok(ThreadRef(id))
    }

    /// Records the end time of a thread.
    pub fn end_thread(&mut self, thread: ThreadRef, end_ns: u64) -> Result<()> {
        self.begin_row()?;
        {
            let st = &mut self.stmts.thread_end;
            st.execute(params![thread.0, i(end_ns)])
        }
        .at(&self.path)?;
        self.end_row(1)
    }

    /// Sets or replaces the name of a thread (names are often given after
    /// the thread started; the last one wins).
    pub fn set_thread_name(&mut self, thread: ThreadRef, name: &str) -> Result<()> {
        self.begin_row()?;
        let sql = format!(
            "UPDATE \"rocpd_info_thread{}\" SET name = ?2 WHERE id = ?1",
            self.suffix
        );
        self.conn
            .prepare_cached(&sql)
            .and_then(|mut st| st.execute(params![thread.0, name]))
            .at(&self.path)?;
        self.end_row(1)
    }

    /// Adds a track (a timeline samples or counters are placed on), for a
    /// thread or for the whole process (`thread = None`).
    pub fn add_track(&mut self, thread: Option<ThreadRef>, name: &str) -> Result<TrackId> {
        let name = self.intern_string(name)?;
        self.begin_row()?;
        {
            let st = &mut self.stmts.track;
            st.execute(params![
                self.nid,
                self.proc_row,
                thread.map(|t| t.0),
                name.0
            ])
        }
        .at(&self.path)?;
        let id = self.conn.last_insert_rowid();
        self.end_row(1)?;
        Ok(TrackId(id))
    }

    /// Appends an event row (the record regions, samples and counter events
    /// hang off) with its arguments.
    pub fn append_event(
        &mut self,
        category: Option<StringId>,
        stack: Option<CallSiteId>,
        correlation_id: Option<u64>,
        args: &[Arg<'_>],
    ) -> Result<EventId> {
        self.begin_row()?;
        {
            let st = &mut self.stmts.event;
            st.execute(params![
                category.map(|c| c.0),
                stack.map(|c| c.0),
                correlation_id.map(i)
            ])
        }
        .at(&self.path)?;
        let id = self.conn.last_insert_rowid();
        if !args.is_empty() {
            let st = &mut self.stmts.arg;
            for (pos, a) in args.iter().enumerate() {
                st.execute(params![id, pos as i64, a.ty, a.name, a.value])
                    .at(&self.path)?;
            }
        }
        self.end_row(1 + args.len())?;
        Ok(EventId(id))
    }

    /// Appends a completed region with an event row of its own (and its
    /// args); returns that event, to which counter values
    /// ([`Writer::append_pmc_event`]) may refer.
    pub fn append_region(&mut self, r: &Region<'_>) -> Result<EventId> {
        let ev = self.append_event(r.category, r.stack, r.correlation_id, r.args)?;
        self.push_region(r, ev)?;
        Ok(ev)
    }

    /// Appends a completed region, the way that costs least: a region
    /// without args, stack or correlation id refers to the one event row
    /// its category shares with every such region (one row per region, not
    /// two); any other gets an event of its own as with
    /// [`Writer::append_region`]. Nothing may be attached to the event
    /// afterwards, so it is not returned.
    pub fn append_region_shared(&mut self, r: &Region<'_>) -> Result<()> {
        if !r.args.is_empty() || r.stack.is_some() || r.correlation_id.is_some() {
            return self.append_region(r).map(|_| ());
        }
        let key = r.category.map_or(0, |c| c.0);
        let ev = match self.region_events.iter().find(|(k, _)| *k == key) {
            Some(&(_, id)) => EventId(id),
            None => {
                let ev = self.append_event(r.category, None, None, &[])?;
                self.region_events.push((key, ev.0));
                ev
            }
        };
        self.push_region(r, ev)
    }

    /// The region row of `r`, whose event is `ev`.
    fn push_region(&mut self, r: &Region<'_>, ev: EventId) -> Result<()> {
        self.begin_row()?;
        self.stmts
            .regions
            .push([
                r.thread.0,
                i(r.start_ns),
                i(r.end_ns.max(r.start_ns)),
                r.name.0,
                ev.0,
            ])
            .at(&self.path)?;
        self.totals.regions += 1;
        self.end_row(1)
    }

    /// Adds a loaded module; frames refer to it by the returned id.
    pub fn add_module(&mut self, m: &ModuleRow<'_>) -> Result<ModuleId> {
        self.begin_row()?;
        {
            let st = &mut self.stmts.module;
            {
                st.execute(params![
                    self.proc_row,
                    m.path,
                    m.build_id,
                    i(m.load_address),
                    i(m.size),
                    i(m.file_offset),
                    m.load_ns.map(i)
                ])
            }
        }
        .at(&self.path)?;
        let id = self.conn.last_insert_rowid();
        self.end_row(1)?;
        Ok(ModuleId(id))
    }

    /// Interns a frame (module + relative pc); names come later through
    /// [`Writer::set_frame_symbols`] or [`crate::symbols::set_frame_symbols`].
    pub fn intern_frame(&mut self, f: StackFrame) -> Result<FrameId> {
        let m = f.module.map_or(0, |m| m.0);
        if let Some(id) = self.caches.frame(m, f.rel_pc) {
            return Ok(FrameId(id));
        }
        self.begin_row()?;
        {
            let st = &mut self.stmts.frame;
            st.execute(params![f.module.map(|m| m.0), i(f.rel_pc)])
        }
        .at(&self.path)?;
        let id = self.conn.last_insert_rowid();
        self.caches.add_frame(m, f.rel_pc, id);
        self.end_row(1)?;
        Ok(FrameId(id))
    }

    /// Interns a call stack given leaf first (`frames[0]` is the innermost
    /// frame, as unwinders produce it) and returns the call site of the leaf.
    /// Returns `None` for an empty stack.
    pub fn intern_stack(&mut self, frames: &[StackFrame]) -> Result<Option<CallSiteId>> {
        if let Some(leaf) = self.caches.stack(frames) {
            return Ok((leaf != 0).then_some(CallSiteId(leaf)));
        }
        let mut parent = 0i64;
        for (depth, f) in frames.iter().rev().enumerate() {
            let frame = self.intern_frame(*f)?.0;
            parent = match self.caches.callsite(parent, frame) {
                Some(id) => id,
                None => {
                    self.begin_row()?;
                    {
                        let st = &mut self.stmts.callsite;
                        {
                            st.execute(params![
                                (parent != 0).then_some(parent),
                                frame,
                                depth as i64
                            ])
                        }
                    }
                    .at(&self.path)?;
                    let id = self.conn.last_insert_rowid();
                    self.caches.add_callsite(parent, frame, id);
                    self.end_row(1)?;
                    id
                }
            };
        }
        self.caches.add_stack(frames, parent);
        Ok((parent != 0).then_some(CallSiteId(parent)))
    }

    /// Appends one sample: `frames` leaf first, on `track` (a thread's
    /// sample track from [`Writer::add_track`]). Writes an event (category
    /// = the sample's kind, `stack_id` = the interned call site; one per
    /// kind and call site) and a `rocpd_sample` row whose `extdata` holds
    /// the weight (`{"weight_ns":N}`).
    pub fn append_sample(
        &mut self,
        track: TrackId,
        sample: SampleMeta,
        frames: &[StackFrame],
    ) -> Result<EventId> {
        let kind = sample.kind as usize;
        let cat = match self.sample_categories[kind] {
            Some(c) => c,
            None => {
                let c = self.intern_string(sample.kind.category())?.0;
                self.sample_categories[kind] = Some(c);
                c
            }
        };
        let stack = self.intern_stack(frames)?;
        let key = (kind, stack.map_or(0, |c| c.0));
        let ev = match self.sample_events.get(&key) {
            Some(&id) => EventId(id),
            None => {
                let ev = self.append_event(Some(StringId(cat)), stack, None, &[])?;
                self.sample_events.insert(key, ev.0);
                ev
            }
        };
        self.begin_row()?;
        self.stmts
            .samples
            .push([track.0, i(sample.timestamp_ns), ev.0, i(sample.weight_ns)])
            .at(&self.path)?;
        self.totals.samples += 1;
        self.end_row(1)?;
        Ok(ev)
    }

    /// Applies weight corrections found at the end of a run (see
    /// [`WeightScale`]). One pass over the samples.
    pub fn scale_sample_weights(&mut self, factors: &[WeightScale]) -> Result<()> {
        if factors.is_empty() {
            return Ok(());
        }
        let mut rows = Vec::with_capacity(factors.len());
        for f in factors {
            let category = self.intern_string(f.kind.category())?.0;
            rows.push([
                f.track.0,
                category,
                i(f.until_ns),
                i(f.numerator),
                i(f.denominator.max(1)),
            ]);
        }
        self.begin_row()?;
        self.flush_bulk()?;
        let s = &self.suffix;
        let result = (|| {
            self.conn.execute_batch(
                "CREATE TEMP TABLE IF NOT EXISTS strobe_weight_factor \
                 (track INTEGER, category INTEGER, until INTEGER, num INTEGER, den INTEGER); \
                 DELETE FROM strobe_weight_factor;",
            )?;
            {
                let mut st = self
                    .conn
                    .prepare("INSERT INTO strobe_weight_factor VALUES (?1, ?2, ?3, ?4, ?5)")?;
                for r in &rows {
                    st.execute(*r)?;
                }
            }
            self.conn.execute(
                &format!(
                    "UPDATE \"rocpd_sample{s}\" AS S SET extdata = json_object('weight_ns', \
                     COALESCE(json_extract(S.extdata, '$.weight_ns'), 0) * F.num / F.den) \
                     FROM strobe_weight_factor F, \"rocpd_event{s}\" E \
                     WHERE F.track = S.track_id AND S.timestamp <= F.until \
                     AND E.id = S.event_id AND E.category_id = F.category"
                ),
                [],
            )?;
            self.conn.execute_batch("DROP TABLE strobe_weight_factor")
        })();
        result.at(&self.path)?;
        // Rows changed, none added.
        self.end_row(0)
    }

    /// Describes a counter (`rocpd_info_pmc`, target CPU).
    pub fn add_counter(&mut self, c: &CounterInfo<'_>) -> Result<CounterId> {
        let agent = self.cpu_agent()?;
        self.begin_row()?;
        {
            let st = &mut self.stmts.pmc;
            {
                st.execute(params![
                    self.nid,
                    self.proc_row,
                    c.name,
                    c.description,
                    c.component,
                    c.units.unwrap_or(""),
                    if c.accumulating { "ACCUM" } else { "ABS" },
                    c.expression,
                    c.expression.is_some() as i64,
                    agent.0
                ])
            }
        }
        .at(&self.path)?;
        let id = self.conn.last_insert_rowid();
        self.end_row(1)?;
        Ok(CounterId(id))
    }

    /// [`Writer::add_counter`] with `extdata` (JSON) in its
    /// `rocpd_info_pmc` row.
    pub fn add_counter_with(&mut self, c: &CounterInfo<'_>, extdata: &str) -> Result<CounterId> {
        let id = self.add_counter(c)?;
        self.begin_row()?;
        let sql = format!(
            "UPDATE \"rocpd_info_pmc{}\" SET extdata = json(?2) WHERE id = ?1",
            self.suffix
        );
        self.conn
            .prepare_cached(&sql)
            .and_then(|mut st| st.execute(params![id.0, extdata]))
            .at(&self.path)?;
        self.end_row(0)?;
        Ok(id)
    }

    /// Appends one counter value of an event (`rocpd_pmc_event`): the
    /// change of `counter` over a region (`event` from
    /// [`Writer::append_region`]); `None` stores NULL (not read).
    pub fn append_pmc_event(
        &mut self,
        event: EventId,
        counter: CounterId,
        value: Option<f64>,
    ) -> Result<()> {
        self.begin_row()?;
        {
            let st = &mut self.stmts.pmc_event;
            st.execute(params![event.0, counter.0, value])
        }
        .at(&self.path)?;
        self.end_row(1)
    }

    /// Records a derived-metric definition the run used (`strobe_metric`).
    pub fn add_metric(&mut self, m: &MetricRow<'_>) -> Result<()> {
        self.begin_row()?;
        let sql = format!(
            "INSERT INTO \"strobe_metric{}\" (name, kind, expression, unit, description, requested) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            self.suffix
        );
        self.conn
            .prepare_cached(&sql)
            .and_then(|mut st| {
                st.execute(params![
                    m.name,
                    m.kind,
                    m.expression,
                    m.unit,
                    m.description,
                    m.requested as i64
                ])
            })
            .at(&self.path)?;
        self.end_row(1)
    }

    /// Records one causal-profiling experiment and what each of its
    /// progress points counted (`strobe_causal_experiment` and one
    /// `strobe_causal_progress` row per entry of `e.progress`).
    pub fn causal_experiment(&mut self, e: &CausalExperiment) -> Result<()> {
        self.begin_row()?;
        let s = &self.suffix;
        let sql = format!(
            "INSERT INTO \"strobe_causal_experiment{s}\" (variant, mode, selection, file, line, function, speedup, start_ns, duration_ns, delay_ns, selected_samples, period_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
        );
        self.conn
            .prepare_cached(&sql)
            .and_then(|mut st| {
                st.execute(params![
                    e.variant,
                    e.mode,
                    e.selection,
                    e.file,
                    e.line,
                    e.function,
                    e.speedup,
                    i(e.start_ns),
                    i(e.duration_ns),
                    i(e.delay_ns),
                    i(e.selected_samples),
                    i(e.period_ns)
                ])
            })
            .at(&self.path)?;
        let id = self.conn.last_insert_rowid();
        let sql = format!(
            "INSERT INTO \"strobe_causal_progress{s}\" (experiment, name, kind, visits, departures, in_flight) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
        );
        {
            let mut st = self.conn.prepare_cached(&sql).at(&self.path)?;
            for p in &e.progress {
                st.execute(params![
                    id,
                    p.name,
                    p.kind.as_str(),
                    i(p.visits),
                    i(p.departures),
                    p.in_flight
                ])
                .at(&self.path)?;
            }
        }
        self.end_row(1 + e.progress.len())
    }

    /// Records the samples a causal run counted in scope, per location
    /// (`file:line` in line mode, the function name in function mode), in
    /// `strobe_causal_sample`. Rows are appended: counts of one location
    /// given in several calls add up (readers sum them).
    pub fn causal_samples(&mut self, counts: &[(String, u64)]) -> Result<()> {
        if counts.is_empty() {
            return Ok(());
        }
        self.begin_row()?;
        let sql = format!(
            "INSERT INTO \"strobe_causal_sample{}\" (location, count) VALUES (?1, ?2)",
            self.suffix
        );
        {
            let mut st = self.conn.prepare_cached(&sql).at(&self.path)?;
            for (location, count) in counts {
                st.execute(params![location, i(*count)]).at(&self.path)?;
            }
        }
        self.end_row(counts.len())
    }

    /// Appends a clock comparison with the reference process
    /// (`strobe_clock_sync`; see [`crate::schema::CLOCK_SYNC_TABLE`]).
    pub fn clock_sync(&mut self, c: &ClockSync<'_>) -> Result<()> {
        self.begin_row()?;
        let sql = format!(
            "INSERT INTO \"strobe_clock_sync{}\" (phase, local_ns, offset_ns, rtt_ns, reference_rank) VALUES (?1, ?2, ?3, ?4, ?5)",
            self.suffix
        );
        self.conn
            .prepare_cached(&sql)
            .and_then(|mut st| {
                st.execute(params![
                    c.phase,
                    i(c.local_ns),
                    c.offset_ns,
                    i(c.rtt_ns),
                    c.reference_rank
                ])
            })
            .at(&self.path)?;
        self.end_row(1)
    }

    /// Appends one point of a counter's time series (`strobe_counter_sample`),
    /// optionally placed on a track (per-thread counters).
    pub fn append_counter_sample(
        &mut self,
        counter: CounterId,
        track: Option<TrackId>,
        timestamp_ns: u64,
        value: f64,
    ) -> Result<()> {
        self.begin_row()?;
        {
            let st = &mut self.stmts.counter;
            st.execute(params![
                counter.0,
                track.map(|t| t.0),
                i(timestamp_ns),
                value
            ])
        }
        .at(&self.path)?;
        self.totals.counter_samples += 1;
        self.end_row(1)
    }

    /// The host's CPU as an agent (`rocpd_info_agent`, type `CPU`), added
    /// with the first counter: rocpd's views join counters to their agent.
    fn cpu_agent(&mut self) -> Result<AgentId> {
        if let Some(a) = self.cpu_agent {
            return Ok(a);
        }
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let field = |key: &str| {
            cpuinfo.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == key).then(|| v.trim().to_string())
            })
        };
        let (model, vendor) = (field("model name"), field("vendor_id"));
        let agent = self.add_agent(&AgentInfo {
            kind: AgentKind::Cpu,
            absolute_index: 0,
            logical_index: 0,
            type_index: 0,
            name: "cpu",
            model_name: model.as_deref(),
            vendor_name: vendor.as_deref(),
            product_name: model.as_deref(),
        })?;
        self.cpu_agent = Some(agent);
        Ok(agent)
    }

    /// Adds a compute agent (`rocpd_info_agent`).
    pub fn add_agent(&mut self, a: &AgentInfo<'_>) -> Result<AgentId> {
        self.begin_row()?;
        let kind = match a.kind {
            AgentKind::Cpu => "CPU",
            AgentKind::Gpu => "GPU",
        };
        self.conn
            .execute(
                &format!("INSERT INTO \"rocpd_info_agent{}\" (nid, pid, type, absolute_index, logical_index, type_index, name, model_name, vendor_name, product_name) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)", self.suffix),
                params![self.nid, self.proc_row, kind, a.absolute_index, a.logical_index, a.type_index, a.name, a.model_name, a.vendor_name, a.product_name],
            )
            .at(&self.path)?;
        let id = self.conn.last_insert_rowid();
        self.end_row(1)?;
        Ok(AgentId(id))
    }

    /// Appends a memory allocation or release (its event and its
    /// `rocpd_memory_allocate` row).
    pub fn append_memory_op(&mut self, m: &MemoryOp) -> Result<EventId> {
        let ev = self.append_event(m.category, m.stack, None, &[])?;
        let op = match m.op {
            AllocOp::Alloc => "ALLOC",
            AllocOp::Free => "FREE",
            AllocOp::Realloc => "REALLOC",
            AllocOp::Reclaim => "RECLAIM",
        };
        let level = match m.level {
            MemLevel::Real => "REAL",
            MemLevel::Virtual => "VIRTUAL",
            MemLevel::Scratch => "SCRATCH",
        };
        self.begin_row()?;
        {
            let st = &mut self.stmts.memory;
            st.execute(params![
                self.nid,
                self.proc_row,
                m.thread.0,
                m.agent.map(|a| a.0),
                op,
                level,
                i(m.start_ns),
                i(m.end_ns.max(m.start_ns)),
                i(m.address),
                i(m.size),
                ev.0
            ])
        }
        .at(&self.path)?;
        self.end_row(1)?;
        Ok(ev)
    }

    /// Records when a module was unloaded (`dlclose`).
    pub fn end_module(&mut self, module: ModuleId, unload_ns: u64) -> Result<()> {
        self.begin_row()?;
        self.conn
            .execute(
                &format!(
                    "UPDATE \"strobe_module{}\" SET unload_time = ?2 WHERE id = ?1",
                    self.suffix
                ),
                params![module.0, i(unload_ns)],
            )
            .at(&self.path)?;
        self.end_row(1)
    }

    /// Writes the statistics rows `(id, stats)`, replacing rows written
    /// before with the same id: the caller numbers each (thread, name)
    /// from 1 and writes the rows again as they change.
    pub fn set_region_stats(&mut self, rows: &[(i64, RegionStats)]) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        self.begin_row()?;
        let sql = format!(
            "INSERT OR REPLACE INTO \"{}{}\" (id, thread_id, name_id, calls, total_ns, self_ns, kept, kept_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            schema::REGION_STATS_TABLE,
            self.suffix
        );
        {
            let mut st = self.conn.prepare_cached(&sql).at(&self.path)?;
            for (id, r) in rows {
                st.execute(params![
                    id,
                    r.thread.0,
                    r.name.0,
                    i(r.calls),
                    i(r.total_ns),
                    i(r.self_ns),
                    i(r.kept),
                    i(r.kept_ns)
                ])
                .at(&self.path)?;
            }
        }
        self.end_row(rows.len())
    }

    /// Records a setting or fact in `strobe_settings`.
    pub fn add_setting(&mut self, name: &str, value: &str) -> Result<()> {
        self.begin_row()?;
        self.conn
            .execute(
                &format!(
                    "INSERT INTO \"strobe_settings{}\" (name, value) VALUES (?1, ?2)",
                    self.suffix
                ),
                params![name, value],
            )
            .at(&self.path)?;
        self.end_row(1)
    }

    /// Sets function, file and line of frames (symbolization). Can run
    /// during the run or at its end; after the run use
    /// [`crate::symbols::set_frame_symbols`] on the closed file.
    pub fn set_frame_symbols(&mut self, symbols: &[FrameSymbols<'_>]) -> Result<()> {
        self.begin_row()?;
        crate::symbols::update_frames(&self.conn, &self.suffix, symbols).at(&self.path)?;
        self.end_row(symbols.len())
    }

    /// Ends the run: commits, records the process end time (`end`, `fini`),
    /// closes threads that have no end time at `end_ns`, writes the totals
    /// into `strobe_settings`, checkpoints the WAL into the main file and
    /// switches the file to rollback-journal mode (`journal_mode=DELETE`),
    /// which removes the `-wal` file; the `-shm` file goes when the
    /// connection closes, at the end of this call. The result is one plain
    /// file that readers open read-only without creating anything beside it.
    ///
    /// The switch needs the file to itself: if another process has it open
    /// (a `strobe query` during the run), it retries for up to 1 s, then
    /// leaves the file in WAL mode, complete and readable, with its `-wal`
    /// and `-shm` files beside it until a read-write connection (such as
    /// post-run symbolization) closes it (see `docs/profile-db.md`); that is
    /// not an error.
    pub fn finish(mut self, end_ns: u64) -> Result<WriterTotals> {
        self.flush()?;
        let s = self.suffix.clone();
        let t = self.totals.clone();
        let sql = format!(
            "BEGIN;
             UPDATE \"rocpd_info_process{s}\" SET \"end\" = {e}, fini = {e} WHERE id = {p};
             UPDATE \"rocpd_info_thread{s}\" SET \"end\" = {e} WHERE \"end\" IS NULL;
             INSERT INTO \"strobe_settings{s}\" (name, value) VALUES
               ('total_rows', '{}'), ('total_regions', '{}'), ('total_samples', '{}'), ('total_counter_samples', '{}');
             COMMIT;",
            t.rows,
            t.regions,
            t.samples,
            t.counter_samples,
            e = i(end_ns),
            p = self.proc_row,
        );
        self.conn.execute_batch(&sql).at(&self.path)?;
        self.conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .optional()
            .at(&self.path)?;
        self.finished = true;
        // Best effort (see above). Leaving WAL needs an exclusive lock, which
        // SQLite tries once (no busy handler): retry while a reader holds the
        // file. Every row is in the main file whatever the outcome.
        let deadline = Instant::now() + FINISH_WAIT;
        while self.leave_wal() == Some(false) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(t)
    }

    /// Switches the file to rollback-journal mode: `Some(true)` when done,
    /// `Some(false)` when another connection holds the file (worth a retry),
    /// `None` on any other failure.
    fn leave_wal(&self) -> Option<bool> {
        match self
            .conn
            .query_row("PRAGMA journal_mode=DELETE", [], |r| r.get::<_, String>(0))
        {
            Ok(mode) => Some(mode.eq_ignore_ascii_case("delete")),
            Err(rusqlite::Error::SqliteFailure(e, _))
                if matches!(
                    e.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                ) =>
            {
                Some(false)
            }
            Err(_) => None,
        }
    }
}

/// How long [`Writer::finish`] retries leaving WAL mode while another
/// connection holds the file.
const FINISH_WAIT: Duration = Duration::from_secs(1);

/// Creates `path` as a new, empty file with mode 0644 (whatever the umask),
/// failing if anything exists there.
pub(crate) fn create_exclusive(path: &Path) -> Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(path)
        .map_err(|error| DbError::Io {
            path: path.to_path_buf(),
            error: if error.kind() == std::io::ErrorKind::AlreadyExists {
                std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "a file already exists there; profiles are never overwritten (remove it or choose another output path)",
                )
            } else {
                error
            },
        })?;
    // open(2) applies the umask to the mode; fchmod(2) does not.
    file.set_permissions(std::fs::Permissions::from_mode(0o644))
        .map_err(|error| DbError::Io {
            path: path.to_path_buf(),
            error,
        })
}

// SAFETY: a Writer exclusively owns its connection and every statement
// borrowing it; none of them is reachable from outside (the statements are
// private and never handed out), so moving the whole bundle to another thread
// moves all users of the connection together. Bundled SQLite is built
// thread-safe (SQLITE_THREADSAFE=1), which allows a connection and its
// statements to be used from any thread as long as not concurrently, and
// Writer is not Sync, so no two threads can use it at once.
unsafe impl Send for Writer {}

impl Drop for Writer {
    fn drop(&mut self) {
        if !self.finished {
            // Best effort: keep what was collected when the owner forgot
            // finish() or unwinds, and leave a plain file as finish() does;
            // errors cannot be reported from drop.
            let _ = self.flush();
            let _ = self.leave_wal();
        }
    }
}

#[cfg(test)]
mod tests {
    fn assert_send<T: Send>() {}

    #[test]
    fn writer_is_send() {
        assert_send::<super::Writer>();
    }
}
