//! What the summary tables are made of: the request and the rows.
//!
//! Owns [`Want`] (which tables), [`Tables`] (every table `strobe summary`
//! prints) and the row types of each table. It never reads a profile: the
//! other files of `summary` fill these.

use serde::Serialize;

/// Which tables [`tables`](super::tables) computes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Want {
    /// Region statistics (and, with counters, the region counter sums).
    pub regions: bool,
    /// Sampled functions (and, with counters, the function counter sums).
    pub functions: bool,
    /// Threads.
    pub threads: bool,
    /// One set of rows per process.
    pub by_process: bool,
}

/// Every table `strobe summary` prints.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tables {
    /// [`region_summary`](super::region_summary), when asked for.
    pub regions: Option<Vec<StatRow>>,
    /// [`function_summary`](super::function_summary), when asked for.
    pub functions: Option<Vec<FunctionRow>>,
    /// [`thread_summary`](super::thread_summary), when asked for.
    pub threads: Option<Vec<ThreadRow>>,
    /// [`profile_counters`](super::profile_counters).
    pub counters: Vec<(String, String)>,
    /// [`stored_metrics`](super::stored_metrics), when the profile read counters per thread
    /// (empty otherwise).
    pub metrics: Vec<StoredMetric>,
    /// [`region_counter_summary`](super::region_counter_summary), with regions and counters.
    pub region_counters: Option<Vec<CounterSumRow>>,
    /// [`function_counter_summary`](super::function_counter_summary), with functions and counters.
    pub function_counters: Option<Vec<CounterSumRow>>,
}

/// One row of a duration summary (regions).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatRow {
    /// OS pid when grouped by process.
    pub pid: Option<i64>,
    /// Process guid when grouped by process.
    pub guid: Option<String>,
    /// Share of the total time of the rows listed (of the same process
    /// when grouped by process), in percent.
    pub time_pct: f64,
    /// Sum of durations (ns).
    pub total_ns: i64,
    /// Number of instances.
    pub instances: u64,
    /// Mean duration (ns).
    pub avg_ns: f64,
    /// Median duration (ns); the mean of the two middle values for an even count.
    pub med_ns: f64,
    /// Shortest duration (ns).
    pub min_ns: i64,
    /// Longest duration (ns).
    pub max_ns: i64,
    /// Sample standard deviation (ns, n − 1 in the denominator; 0 for one instance).
    pub stddev_ns: f64,
    /// Region name.
    pub name: String,
    /// When a time filter stored only the longer user-API regions
    /// (`trace_time_filter`): their exact self time (ns), and how many of
    /// the `instances` the database holds. `instances`, `total_ns` and
    /// `avg_ns` then count every region; the median, minimum, maximum and
    /// deviation describe the stored ones.
    pub counted: Option<Counted>,
}

/// Exact figures of regions a time filter did not all store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counted {
    /// Total time less the time of regions nested in them (ns).
    pub self_ns: i64,
    /// Regions the database holds.
    pub stored: u64,
}

/// One row of the sampled-function summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionRow {
    /// OS pid when grouped by process.
    pub pid: Option<i64>,
    /// Process guid when grouped by process.
    pub guid: Option<String>,
    /// On-CPU samples whose innermost frame is this function.
    pub self_samples: u64,
    /// Time those samples stand for (ns, the sum of their weights).
    pub self_ns: u64,
    /// `self_ns` as a percentage of all on-CPU time sampled (of the
    /// process); of all samples for databases without weights.
    pub self_pct: f64,
    /// On-CPU samples with this function anywhere on the stack (counted
    /// once per sample).
    pub total_samples: u64,
    /// Time those samples stand for (ns).
    pub total_ns: u64,
    /// `total_ns` as a percentage of all on-CPU time sampled (of the process).
    pub total_pct: f64,
    /// Off-CPU time (blocked) with this function innermost (ns).
    pub off_cpu_self_ns: u64,
    /// Off-CPU time with this function anywhere on the stack (ns).
    pub off_cpu_total_ns: u64,
    /// Function name, or `module+0xoffset` before symbolization, or
    /// `[no stack]` for samples without a call stack.
    pub name: String,
}

/// One row of the per-thread summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThreadRow {
    /// OS pid.
    pub pid: i64,
    /// Process guid.
    pub guid: String,
    /// OS tid.
    pub tid: i64,
    /// Thread name as recorded (the kernel's, or the one the program
    /// gave); a main thread (`tid == pid`) without one is named after its
    /// program (see [`name_main_threads`](super::threads::name_main_threads)).
    pub name: Option<String>,
    /// On-CPU samples taken on the thread.
    pub samples: u64,
    /// Time they stand for (ns, the sum of their weights).
    pub sampled_ns: u64,
    /// Share of all on-CPU time sampled, in percent (of the process when
    /// grouped); of all samples for databases without weights.
    pub sample_pct: f64,
    /// Time the thread was seen blocked (off-CPU samples, ns).
    pub off_cpu_ns: u64,
    /// Regions recorded on the thread.
    pub regions: u64,
    /// Sum of region durations (ns), nested regions counted each.
    pub region_total_ns: i64,
    /// Thread lifetime end − start (ns), when both are known.
    pub lifetime_ns: Option<i64>,
}

impl ThreadRow {
    /// A thread as the `threads` view lists it (`start` and `end` as
    /// stored), before samples and regions are counted on it.
    pub(crate) fn listed(
        guid: String,
        pid: i64,
        tid: i64,
        name: Option<String>,
        (start, end): (Option<i64>, Option<i64>),
    ) -> ThreadRow {
        ThreadRow {
            pid,
            guid,
            tid,
            name,
            samples: 0,
            sampled_ns: 0,
            sample_pct: 0.0,
            off_cpu_ns: 0,
            regions: 0,
            region_total_ns: 0,
            lifetime_ns: start.zip(end).map(|(s, e)| e - s),
        }
    }
}

/// Counter sums of one region name or function (per process with
/// `by_process`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CounterSumRow {
    /// OS pid when grouped by process.
    pub pid: Option<i64>,
    /// Process guid when grouped by process.
    pub guid: Option<String>,
    /// Region name, or function name (innermost frame of the samples).
    pub name: String,
    /// Regions, or samples, the sums are over.
    pub count: u64,
    /// The sum of each counter's values (in [`profile_counters`](super::profile_counters) order);
    /// `None` when no value of it was read.
    pub sums: Vec<Option<f64>>,
}

/// A derived-metric definition stored with a profile (`strobe_metric`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredMetric {
    /// The name requests use.
    pub name: String,
    /// `metric` or `counter`.
    pub kind: String,
    /// A metric's expression; a counter's event spec.
    pub expression: String,
    /// Unit of its values.
    pub unit: Option<String>,
    /// What it measures.
    pub description: Option<String>,
    /// Asked for (else only referred to).
    pub requested: bool,
}
