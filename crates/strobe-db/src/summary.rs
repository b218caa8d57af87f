//! Summary tables computed from a profile (Nsight Systems `stats` style).
//!
//! Owns the numbers behind `strobe summary`: per-name region statistics
//! (total, instances, average, median, min, max, standard deviation, share),
//! per-function samples and the time they stand for (self and inclusive,
//! on and off CPU, from each sample's weight) and per-thread totals.
//! Memory grows with the number of distinct names, call stacks and threads,
//! never with the number of rows: regions are read raw by reader threads
//! in two passes, the second keeping only the durations around each
//! median ([`crate::region_scan`], [`crate::duration_stats`]); sampled
//! functions are folded one process at a time. A profile read in place
//! (many files) sorts its regions' durations in SQLite instead. [`tables`]
//! computes every table at once (for a profile read in place, in one pass
//! over its processes: `summary_fold`). A time filter's exact counts
//! (`strobe_region_stats`) replace the stored regions' in the region and
//! thread tables. A main thread the database has no name for is named
//! after its program. It never formats or prints; the CLI, the Python package
//! and exporters share it.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use crate::duration_stats::{FirstPass, MedianTarget};
use crate::region_scan;

use crate::error::{Result, SqlContext};
use crate::reader::Profile;

/// Which tables [`tables`] computes.
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
    /// [`region_summary`], when asked for.
    pub regions: Option<Vec<StatRow>>,
    /// [`function_summary`], when asked for.
    pub functions: Option<Vec<FunctionRow>>,
    /// [`thread_summary`], when asked for.
    pub threads: Option<Vec<ThreadRow>>,
    /// [`profile_counters`].
    pub counters: Vec<(String, String)>,
    /// [`stored_metrics`], when the profile read counters per thread
    /// (empty otherwise).
    pub metrics: Vec<StoredMetric>,
    /// [`region_counter_summary`], with regions and counters.
    pub region_counters: Option<Vec<CounterSumRow>>,
    /// [`function_counter_summary`], with functions and counters.
    pub function_counters: Option<Vec<CounterSumRow>>,
}

/// Every table `want` asks for. For a profile read in place (more than
/// [`crate::reader::MAX_ATTACHED`] files) they are computed in one pass
/// over its processes, each database opened once
/// (`summary_fold`); otherwise by the functions of this module,
/// one query each. Both give the same rows (sums of floating-point counter
/// values may differ in their last bits: they are added in another order).
pub fn tables(p: &Profile, want: Want) -> Result<Tables> {
    if let Some(fed) = p.federation() {
        return crate::summary_fold::tables(p, fed, want);
    }
    let counters = profile_counters(p)?;
    let has_counters = !counters.is_empty();
    let by = want.by_process;
    // One pass over the regions and one over the samples serve every table.
    let region_pass = (want.regions || want.threads)
        .then(|| region_scan::first_pass(p))
        .transpose()?;
    let mut functions = want.functions.then(FunctionFold::default);
    let mut weights = want.threads.then(ThreadWeights::default);
    if want.functions || want.threads {
        crate::scan::for_each_process(p, p.sampling_period_ns(), want.functions, &mut |ps| {
            if let Some(f) = &mut functions {
                f.add(&ps, by);
            }
            if let Some(w) = &mut weights {
                w.add(&ps);
            }
            Ok(())
        })?;
    }
    Ok(Tables {
        regions: match (&region_pass, want.regions) {
            (Some(scan), true) => Some(regions_of_scan(p, scan, by)?),
            _ => None,
        },
        functions: functions.map(FunctionFold::finish),
        threads: weights
            .map(|w| threads_of(p, w.groups(), region_pass.as_ref(), by))
            .transpose()?,
        metrics: if has_counters {
            stored_metrics(p)?
        } else {
            Vec::new()
        },
        region_counters: (want.regions && has_counters)
            .then(|| region_counter_summary(p, &counters, want.by_process))
            .transpose()?,
        function_counters: (want.functions && has_counters)
            .then(|| function_counter_summary(p, &counters, want.by_process))
            .transpose()?,
        counters,
    })
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
    /// program (see [`name_main_threads`]).
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

type GroupKey = (Option<String>, String);

#[derive(Default)]
struct Acc {
    pid: Option<i64>,
    n: u64,
    total: i64,
    min: i64,
    max: i64,
    mean: f64,
    idx: u64,
    med_lo: f64,
    med_hi: f64,
    /// Sum of the squared durations (see `duration_stats::sample_stddev`).
    squares: i128,
}

/// Region statistics per name (per process and name with `by_process`),
/// sorted by total time, largest first.
pub fn region_summary(p: &Profile, by_process: bool) -> Result<Vec<StatRow>> {
    if p.is_federated() {
        return duration_summary(p, "regions", "name", "duration", by_process);
    }
    regions_of_scan(p, &region_scan::first_pass(p)?, by_process)
}

/// [`region_summary`] from the first pass of the raw region scan: groups
/// per (process with `by_process`, name), their medians from the second
/// pass.
fn regions_of_scan(
    p: &Profile,
    scan: &region_scan::RegionScan,
    by_process: bool,
) -> Result<Vec<StatRow>> {
    let key = |k: usize, name: &str| {
        (
            by_process.then(|| scan.sets[k].guid.clone()),
            name.to_string(),
        )
    };
    let mut groups: HashMap<GroupKey, (Option<i64>, FirstPass)> = HashMap::new();
    for (k, set) in scan.sets.iter().enumerate() {
        for (name, f) in &set.names {
            let pid = if by_process { set.pid } else { None };
            groups
                .entry(key(k, name))
                .or_insert((pid, FirstPass::default()))
                .1
                .merge(f);
        }
    }
    let targets: HashMap<GroupKey, MedianTarget> = groups
        .iter()
        .map(|(g, (_, f))| (g.clone(), f.median_target()))
        .collect();
    let kept = region_scan::second_pass(scan, &|k, name| targets.get(&key(k, name)).copied())?;
    let mut kept_by_group: HashMap<GroupKey, BTreeMap<i64, u64>> = HashMap::new();
    for (k, names) in kept.into_iter().enumerate() {
        for (name, values) in names {
            let into = kept_by_group.entry(key(k, &name)).or_default();
            for (v, c) in values {
                *into.entry(v).or_default() += c;
            }
        }
    }
    let rows = groups
        .into_iter()
        .map(|(g, (pid, f))| {
            let med_ns = kept_by_group
                .get(&g)
                .map_or(0.0, |kept| targets[&g].median(kept));
            StatRow {
                pid,
                guid: g.0,
                time_pct: 0.0,
                total_ns: f.total,
                instances: f.n,
                avg_ns: f.mean(),
                med_ns,
                min_ns: f.min,
                max_ns: f.max,
                stddev_ns: f.stddev(),
                name: g.1,
                counted: None,
            }
        })
        .collect();
    Ok(with_shares(with_call_counts(p, rows, by_process)?))
}

/// Replaces the counts and totals of `rows` with the exact ones of
/// `strobe_region_stats`, for the names a time filter counted (adding
/// names none of whose regions was stored).
fn with_call_counts(p: &Profile, mut rows: Vec<StatRow>, by_process: bool) -> Result<Vec<StatRow>> {
    // (group, name) → a row holding only the counted figures.
    let mut counted: HashMap<GroupKey, StatRow> = HashMap::new();
    for c in counted_calls(p)? {
        let guid = by_process.then_some(c.guid);
        let row = counted
            .entry((guid.clone(), c.name.clone()))
            .or_insert_with(|| StatRow {
                pid: if by_process { c.pid } else { None },
                guid,
                time_pct: 0.0,
                total_ns: 0,
                instances: 0,
                avg_ns: 0.0,
                med_ns: 0.0,
                min_ns: 0,
                max_ns: 0,
                stddev_ns: 0.0,
                name: c.name,
                counted: Some(Counted::default()),
            });
        row.instances += c.calls.max(0) as u64;
        row.total_ns = row.total_ns.saturating_add(c.total_ns);
        if let Some(k) = &mut row.counted {
            k.self_ns = k.self_ns.saturating_add(c.self_ns);
            k.stored += c.kept.max(0) as u64;
        }
    }
    for r in &mut rows {
        if let Some(c) = counted.remove(&(r.guid.clone(), r.name.clone())) {
            (r.instances, r.total_ns, r.counted) = (c.instances, c.total_ns, c.counted);
        }
    }
    rows.extend(counted.into_values());
    for r in rows.iter_mut().filter(|r| r.counted.is_some()) {
        r.avg_ns = if r.instances > 0 {
            r.total_ns as f64 / r.instances as f64
        } else {
            0.0
        };
    }
    Ok(rows)
}

/// Sets each row's share of its process's (or the whole profile's) total
/// and sorts: by process, then total time, largest first, then name.
fn with_shares(mut rows: Vec<StatRow>) -> Vec<StatRow> {
    let mut group_total: HashMap<Option<String>, i64> = HashMap::new();
    for r in &rows {
        *group_total.entry(r.guid.clone()).or_default() += r.total_ns;
    }
    for r in &mut rows {
        let gt = group_total.get(&r.guid).copied().unwrap_or(0);
        r.time_pct = if gt > 0 {
            r.total_ns as f64 * 100.0 / gt as f64
        } else {
            0.0
        };
    }
    rows.sort_by(|a, b| {
        a.guid
            .cmp(&b.guid)
            .then(b.total_ns.cmp(&a.total_ns))
            .then(a.name.cmp(&b.name))
    });
    rows
}

/// Duration statistics over any view with a name and a duration column.
/// `view`, `name_col` and `dur_col` are SQL identifiers chosen by the caller.
pub fn duration_summary(
    p: &Profile,
    view: &str,
    name_col: &str,
    dur_col: &str,
    by_process: bool,
) -> Result<Vec<StatRow>> {
    let path = p.files().first().cloned().unwrap_or_default();
    duration_summary_on(p.connection(), &path, view, name_col, dur_col, by_process)
}

/// [`duration_summary`] over a view or table of `conn` (errors name
/// `path`): `view` needs a `guid` and a `pid` column with `by_process`.
pub(crate) fn duration_summary_on(
    conn: &rusqlite::Connection,
    path: &std::path::Path,
    view: &str,
    name_col: &str,
    dur_col: &str,
    by_process: bool,
) -> Result<Vec<StatRow>> {
    let path = path.to_path_buf();
    let g = if by_process { "guid" } else { "NULL" };
    let pid = if by_process { "MIN(pid)" } else { "NULL" };
    let mut accs: HashMap<GroupKey, Acc> = HashMap::new();
    {
        let mut st = conn
            .prepare(&format!(
                "SELECT {g}, {pid}, {name_col}, COUNT(*), SUM({dur_col}), MIN({dur_col}), MAX({dur_col}) FROM {view} GROUP BY 1, 3"
            ))
            .at(&path)?;
        let mut rows = st.query([]).at(&path)?;
        while let Some(r) = rows.next().at(&path)? {
            let key: GroupKey = (
                r.get(0).at(&path)?,
                r.get::<_, Option<String>>(2).at(&path)?.unwrap_or_default(),
            );
            let n: i64 = r.get(3).at(&path)?;
            let total: i64 = r.get(4).at(&path)?;
            accs.insert(
                key,
                Acc {
                    pid: r.get(1).at(&path)?,
                    n: n as u64,
                    total,
                    min: r.get(5).at(&path)?,
                    max: r.get(6).at(&path)?,
                    mean: total as f64 / n as f64,
                    ..Acc::default()
                },
            );
        }
    }
    {
        let mut st = conn
            .prepare(&format!(
                "SELECT {g}, {name_col}, {dur_col} FROM {view} ORDER BY 1, 2, 3"
            ))
            .at(&path)?;
        let mut rows = st.query([]).at(&path)?;
        let mut cur: Option<GroupKey> = None;
        while let Some(r) = rows.next().at(&path)? {
            let key: GroupKey = (
                r.get(0).at(&path)?,
                r.get::<_, Option<String>>(1).at(&path)?.unwrap_or_default(),
            );
            let d: i64 = r.get(2).at(&path)?;
            if cur.as_ref() != Some(&key) {
                cur = Some(key.clone());
            }
            let Some(a) = accs.get_mut(cur.as_ref().expect("set above")) else {
                continue;
            };
            let k = a.idx;
            if k == (a.n - 1) / 2 {
                a.med_lo = d as f64;
            }
            if k == a.n / 2 {
                a.med_hi = d as f64;
            }
            a.squares = a.squares.saturating_add(i128::from(d) * i128::from(d));
            a.idx += 1;
        }
    }
    let rows = accs
        .into_iter()
        .map(|((guid, name), a)| StatRow {
            pid: a.pid,
            time_pct: 0.0,
            total_ns: a.total,
            instances: a.n,
            avg_ns: a.mean,
            med_ns: (a.med_lo + a.med_hi) / 2.0,
            min_ns: a.min,
            max_ns: a.max,
            stddev_ns: crate::duration_stats::sample_stddev(a.n, i128::from(a.total), a.squares),
            guid,
            name,
            counted: None,
        })
        .collect();
    Ok(with_shares(rows))
}

/// Samples and the time they stand for, on and off CPU.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Weights {
    pub(crate) samples: u64,
    pub(crate) ns: u64,
    pub(crate) off_cpu_ns: u64,
}

impl Weights {
    pub(crate) fn add(&mut self, w: &Weights) {
        self.samples += w.samples;
        self.ns += w.ns;
        self.off_cpu_ns += w.off_cpu_ns;
    }

    /// `self` as a percentage of `all`: by time, or by count when the
    /// database holds no weights.
    fn pct_of(&self, all: &Weights) -> f64 {
        if all.ns > 0 {
            self.ns as f64 * 100.0 / all.ns as f64
        } else if all.samples > 0 {
            self.samples as f64 * 100.0 / all.samples as f64
        } else {
            0.0
        }
    }
}

/// One group of samples: process guid, pid, the grouping key's value and
/// the group's weights.
type WeightGroup = (String, i64, Option<i64>, Weights);

/// The sample weights grouped by process and thread, from
/// [`crate::scan::for_each_process`] (a sample without a recorded weight
/// counts one sampling period, as in the exports). Memory grows with
/// threads, one process's stacks at a time.
fn thread_weights(p: &Profile) -> Result<Vec<WeightGroup>> {
    let mut weights = ThreadWeights::default();
    crate::scan::for_each_process(p, p.sampling_period_ns(), false, &mut |ps| {
        weights.add(&ps);
        Ok(())
    })?;
    Ok(weights.groups())
}

/// Sample weights summed per (process, thread), one process at a time.
#[derive(Default)]
struct ThreadWeights(std::collections::BTreeMap<(String, Option<i64>), (i64, Weights)>);

impl ThreadWeights {
    fn add(&mut self, ps: &crate::scan::ProcessSamples) {
        for g in &ps.groups {
            let e = self
                .0
                .entry((g.guid.to_string(), Some(g.tid)))
                .or_insert((g.pid, Weights::default()));
            e.1.add(&Weights {
                samples: g.samples,
                ns: g.cpu_ns,
                off_cpu_ns: g.off_cpu_ns,
            });
        }
    }

    fn groups(self) -> Vec<WeightGroup> {
        self.0
            .into_iter()
            .map(|((guid, key), (pid, w))| (guid, pid, key, w))
            .collect()
    }
}

/// Sampled functions: self and inclusive samples and time per function
/// name, on and off CPU (per process with `by_process`), sorted by self
/// time, then inclusive. The processes are folded in one at a time (see
/// [`crate::scan::for_each_process`]): memory grows with distinct names
/// (per process with `by_process`), never with the number of processes.
pub fn function_summary(p: &Profile, by_process: bool) -> Result<Vec<FunctionRow>> {
    let mut fold = FunctionFold::default();
    crate::scan::for_each_process(p, p.sampling_period_ns(), true, &mut |ps| {
        fold.add(&ps, by_process);
        Ok(())
    })?;
    Ok(fold.finish())
}

/// Self and inclusive weights per function name, folded in one process
/// at a time (what [`function_summary`] computes).
#[derive(Default)]
pub(crate) struct FunctionFold {
    selfw: HashMap<(Option<String>, String), Weights>,
    incl: HashMap<(Option<String>, String), Weights>,
    totals: HashMap<Option<String>, Weights>,
    pids: HashMap<String, i64>,
    names: HashSet<String>,
}

impl FunctionFold {
    /// Adds one process's sample groups (its stacks resolved).
    pub(crate) fn add(&mut self, ps: &crate::scan::ProcessSamples, by_process: bool) {
        // Per stack, the threads together (the pid of its first group).
        let mut per_stack: std::collections::BTreeMap<Option<i64>, (i64, Weights)> =
            Default::default();
        for g in &ps.groups {
            per_stack
                .entry(g.stack_id)
                .or_insert((g.pid, Weights::default()))
                .1
                .add(&Weights {
                    samples: g.samples,
                    ns: g.cpu_ns,
                    off_cpu_ns: g.off_cpu_ns,
                });
        }
        let guid = ps.guid.to_string();
        for (stack, (pid, w)) in per_stack {
            self.pids.insert(guid.clone(), pid);
            let gk = by_process.then(|| guid.clone());
            self.totals.entry(gk.clone()).or_default().add(&w);
            let frames: &[crate::ResolvedFrame] = stack
                .and_then(|s| ps.stacks.get(&s))
                .map_or(&[], |f| &f[..]);
            let leaf = frames
                .first()
                .map_or_else(|| "[no stack]".to_string(), |f| f.display_name());
            self.selfw
                .entry((gk.clone(), leaf.clone()))
                .or_default()
                .add(&w);
            self.names.clear();
            if frames.is_empty() {
                self.names.insert(leaf);
            }
            for f in frames {
                self.names.insert(f.display_name());
            }
            for name in self.names.drain() {
                self.incl.entry((gk.clone(), name)).or_default().add(&w);
            }
        }
    }

    /// The rows, sorted by self time, then inclusive.
    pub(crate) fn finish(self) -> Vec<FunctionRow> {
        let FunctionFold {
            selfw,
            incl,
            totals,
            pids,
            ..
        } = self;
        let mut out: Vec<FunctionRow> = incl
            .into_iter()
            .map(|((guid, name), total)| {
                let own = selfw
                    .get(&(guid.clone(), name.clone()))
                    .copied()
                    .unwrap_or_default();
                let all = totals.get(&guid).copied().unwrap_or_default();
                FunctionRow {
                    pid: guid.as_ref().and_then(|g| pids.get(g).copied()),
                    self_samples: own.samples,
                    self_ns: own.ns,
                    self_pct: own.pct_of(&all),
                    total_samples: total.samples,
                    total_ns: total.ns,
                    total_pct: total.pct_of(&all),
                    off_cpu_self_ns: own.off_cpu_ns,
                    off_cpu_total_ns: total.off_cpu_ns,
                    guid,
                    name,
                }
            })
            .collect();
        // Wall-clock order: time on and off CPU together (just on-CPU time,
        // or samples, when nothing was recorded off CPU).
        out.sort_by(|a, b| {
            a.guid
                .cmp(&b.guid)
                .then((b.self_ns + b.off_cpu_self_ns).cmp(&(a.self_ns + a.off_cpu_self_ns)))
                .then(b.self_samples.cmp(&a.self_samples))
                .then((b.total_ns + b.off_cpu_total_ns).cmp(&(a.total_ns + a.off_cpu_total_ns)))
                .then(b.total_samples.cmp(&a.total_samples))
                .then(a.name.cmp(&b.name))
        });
        out
    }
}

/// Per-thread totals: samples (and share), regions and their summed time,
/// lifetime. Shares are of all samples (of the thread's process with
/// `by_process`). Sorted by samples, then region time.
pub fn thread_summary(p: &Profile, by_process: bool) -> Result<Vec<ThreadRow>> {
    let regions = if p.is_federated() {
        None
    } else {
        Some(region_scan::first_pass(p)?)
    };
    threads_of(p, thread_weights(p)?, regions.as_ref(), by_process)
}

/// [`thread_summary`] from the sample weights per thread and, unless the
/// profile is read in place, the first pass of the region scan.
fn threads_of(
    p: &Profile,
    weights: Vec<WeightGroup>,
    regions: Option<&region_scan::RegionScan>,
    by_process: bool,
) -> Result<Vec<ThreadRow>> {
    let conn = p.connection();
    let path = p.files().first().cloned().unwrap_or_default();
    let mut rows: HashMap<(String, i64), ThreadRow> = HashMap::new();
    {
        let mut st = conn
            .prepare("SELECT guid, pid, tid, name, start, \"end\" FROM threads")
            .at(&path)?;
        let mut q = st.query([]).at(&path)?;
        while let Some(r) = q.next().at(&path)? {
            let guid: String = r.get(0).at(&path)?;
            let tid: i64 = r.get(2).at(&path)?;
            let (s, e): (Option<i64>, Option<i64>) = (r.get(4).at(&path)?, r.get(5).at(&path)?);
            rows.insert(
                (guid.clone(), tid),
                ThreadRow {
                    pid: r.get(1).at(&path)?,
                    guid,
                    tid,
                    name: r.get(3).at(&path)?,
                    samples: 0,
                    sampled_ns: 0,
                    sample_pct: 0.0,
                    off_cpu_ns: 0,
                    regions: 0,
                    region_total_ns: 0,
                    lifetime_ns: s.zip(e).map(|(s, e)| e - s),
                },
            );
        }
    }
    if rows.values().any(unnamed_main) {
        let mut commands = Vec::new();
        let mut st = conn
            .prepare("SELECT guid, command FROM processes")
            .at(&path)?;
        let mut q = st.query([]).at(&path)?;
        while let Some(r) = q.next().at(&path)? {
            commands.push((r.get(0).at(&path)?, r.get(1).at(&path)?));
        }
        name_main_threads(rows.values_mut(), &commands);
    }
    for (guid, _, tid, w) in weights {
        if let Some(t) = rows.get_mut(&(guid, tid.unwrap_or(-1))) {
            t.samples = w.samples;
            t.sampled_ns = w.ns;
            t.off_cpu_ns = w.off_cpu_ns;
        }
    }
    if let Some(scan) = regions {
        for set in &scan.sets {
            for (tid, (n, total)) in &set.threads {
                if let Some(t) = rows.get_mut(&(set.guid.clone(), *tid)) {
                    t.regions = *n;
                    t.region_total_ns = *total;
                }
            }
        }
        // The regions a time filter counted and did not store.
        for c in counted_calls(p)? {
            if let Some(t) = rows.get_mut(&(c.guid, c.tid)) {
                t.regions += (c.calls - c.kept).max(0) as u64;
                t.region_total_ns = t.region_total_ns.saturating_add(c.total_ns - c.kept_ns);
            }
        }
    } else {
        let mut st = conn
            .prepare("SELECT guid, tid, COUNT(*), SUM(duration) FROM regions GROUP BY guid, tid")
            .at(&path)?;
        let mut q = st.query([]).at(&path)?;
        while let Some(r) = q.next().at(&path)? {
            let key = (
                r.get::<_, String>(0).at(&path)?,
                r.get::<_, i64>(1).at(&path)?,
            );
            if let Some(t) = rows.get_mut(&key) {
                t.regions = r.get::<_, i64>(2).at(&path)? as u64;
                t.region_total_ns = r.get(3).at(&path)?;
            }
        }
    }
    Ok(finish_threads(rows, by_process))
}

/// A main thread (`tid == pid`) without a recorded name.
pub(crate) fn unnamed_main(t: &ThreadRow) -> bool {
    t.tid == t.pid && t.name.as_deref().is_none_or(str::is_empty)
}

/// Names each main thread without a recorded name after its process's
/// program (`commands`: (guid, command line) of the processes; the
/// program's file name, as the kernel names a main thread, untruncated).
/// Databases from before the collector recorded a main thread's name have
/// none, nor has a thread only the kernel sampled that was gone before its
/// name could be read.
pub(crate) fn name_main_threads<'a>(
    threads: impl IntoIterator<Item = &'a mut ThreadRow>,
    commands: &[(String, Option<String>)],
) {
    let program = |guid: &str| {
        let command = commands.iter().find(|(g, _)| g == guid)?.1.as_deref()?;
        let first = command.split_whitespace().next()?;
        let name = first.rsplit('/').next().unwrap_or(first);
        (!name.is_empty()).then(|| name.to_string())
    };
    for t in threads {
        if unnamed_main(t) {
            if let Some(name) = program(&t.guid) {
                t.name = Some(name);
            }
        }
    }
}

/// One `strobe_region_stats` row, named: the calls a time filter counted
/// on one thread under one name.
struct CountedCalls {
    guid: String,
    pid: Option<i64>,
    tid: i64,
    name: String,
    calls: i64,
    total_ns: i64,
    self_ns: i64,
    kept: i64,
    kept_ns: i64,
}

/// Every `strobe_region_stats` row of `p` (none for a run without a time
/// filter, or a file older than the table).
fn counted_calls(p: &Profile) -> Result<Vec<CountedCalls>> {
    let mut out = Vec::new();
    for (k, (ts, guid)) in p.table_sets().iter().enumerate() {
        let (sc, sf) = (&ts.schema, &ts.suffix);
        let table = format!("{}{sf}", crate::schema::REGION_STATS_TABLE);
        let sql = format!(
            "SELECT (SELECT MIN(pid) FROM \"{sc}\".\"rocpd_info_process{sf}\"), T.tid, S.string, \
             C.calls, C.total_ns, C.self_ns, C.kept, C.kept_ns FROM \"{sc}\".\"{table}\" C \
             JOIN \"{sc}\".\"rocpd_string{sf}\" S ON S.id = C.name_id \
             JOIN \"{sc}\".\"rocpd_info_thread{sf}\" T ON T.id = C.thread_id"
        );
        let q = crate::scan::qerr(&sql);
        p.with_set_connection(k, |conn| {
            if !crate::schema::has_table(conn, sc, &table).map_err(&q)? {
                return Ok(());
            }
            let mut st = conn.prepare(&sql).map_err(&q)?;
            let mut rows = st.query([]).map_err(&q)?;
            while let Some(r) = rows.next().map_err(&q)? {
                out.push(CountedCalls {
                    guid: guid.clone(),
                    pid: r.get(0).map_err(&q)?,
                    tid: r.get(1).map_err(&q)?,
                    name: r.get(2).map_err(&q)?,
                    calls: r.get(3).map_err(&q)?,
                    total_ns: r.get(4).map_err(&q)?,
                    self_ns: r.get(5).map_err(&q)?,
                    kept: r.get(6).map_err(&q)?,
                    kept_ns: r.get(7).map_err(&q)?,
                });
            }
            Ok(())
        })?;
    }
    Ok(out)
}

/// The thread rows with their shares, sorted (what [`thread_summary`]
/// returns).
pub(crate) fn finish_threads(
    rows: HashMap<(String, i64), ThreadRow>,
    by_process: bool,
) -> Vec<ThreadRow> {
    let weights = |t: &ThreadRow| Weights {
        samples: t.samples,
        ns: t.sampled_ns,
        off_cpu_ns: t.off_cpu_ns,
    };
    let mut totals: HashMap<Option<String>, Weights> = HashMap::new();
    for t in rows.values() {
        totals
            .entry(by_process.then(|| t.guid.clone()))
            .or_default()
            .add(&weights(t));
    }
    let mut out: Vec<ThreadRow> = rows.into_values().collect();
    for t in &mut out {
        let all = totals
            .get(&by_process.then(|| t.guid.clone()))
            .copied()
            .unwrap_or_default();
        t.sample_pct = weights(t).pct_of(&all);
    }
    out.sort_by(|a, b| {
        let ga = by_process.then_some(&a.guid);
        let gb = by_process.then_some(&b.guid);
        ga.cmp(&gb)
            .then(b.sample_pct.total_cmp(&a.sample_pct))
            .then(b.off_cpu_ns.cmp(&a.off_cpu_ns))
            .then(b.region_total_ns.cmp(&a.region_total_ns))
            .then(a.pid.cmp(&b.pid))
            .then(a.tid.cmp(&b.tid))
            // Processes of different nodes share pids.
            .then(a.guid.cmp(&b.guid))
    });
    out
}

/// The counters a profile read per thread (`sampling_events`, see
/// `docs/metrics.md`, Counters in profiles): `(name, unit)`, in the order
/// they were first described. Empty when it read none.
pub fn profile_counters(p: &Profile) -> Result<Vec<(String, String)>> {
    let path = p.files().first().cloned().unwrap_or_default();
    let mut st = p
        .connection()
        .prepare(
            "SELECT name, COALESCE(units, '') FROM rocpd_info_pmc \
             WHERE json_extract(extdata, '$.strobe') = 'sampling_events' ORDER BY guid, id",
        )
        .at(&path)?;
    let mut rows = st.query([]).at(&path)?;
    let mut out: Vec<(String, String)> = Vec::new();
    while let Some(r) = rows.next().at(&path)? {
        let name: String = r.get(0).at(&path)?;
        if !out.iter().any(|(n, _)| *n == name) {
            out.push((name, r.get(1).at(&path)?));
        }
    }
    Ok(out)
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
    /// The sum of each counter's values (in [`profile_counters`] order);
    /// `None` when no value of it was read.
    pub sums: Vec<Option<f64>>,
}

fn add_sum(row: &mut CounterSumRow, i: usize, sum: Option<f64>) {
    if let Some(v) = sum {
        let slot = &mut row.sums[i];
        *slot = Some(slot.unwrap_or(0.0) + v);
    }
}

/// Per region name: the sum of each counter's change over its regions
/// (`rocpd_pmc_event`), with the regions counted. Sorted by name (per
/// process with `by_process`).
pub fn region_counter_summary(
    p: &Profile,
    counters: &[(String, String)],
    by_process: bool,
) -> Result<Vec<CounterSumRow>> {
    let path = p.files().first().cloned().unwrap_or_default();
    let g = if by_process { "guid" } else { "NULL" };
    let mut st = p
        .connection()
        .prepare(&format!(
            "SELECT {g}, MIN(pid), name, counter, SUM(value), COUNT(DISTINCT guid || ':' || region_id) \
             FROM strobe_region_counters GROUP BY 1, 3, 4"
        ))
        .at(&path)?;
    let mut rows = st.query([]).at(&path)?;
    let mut out: std::collections::BTreeMap<(Option<String>, String), CounterSumRow> =
        Default::default();
    while let Some(r) = rows.next().at(&path)? {
        let guid: Option<String> = r.get(0).at(&path)?;
        let name: String = r.get::<_, Option<String>>(2).at(&path)?.unwrap_or_default();
        let counter: String = r.get(3).at(&path)?;
        let Some(i) = counters.iter().position(|(c, _)| *c == counter) else {
            continue;
        };
        let row = out
            .entry((guid.clone(), name.clone()))
            .or_insert_with(|| CounterSumRow {
                pid: None,
                guid,
                name,
                count: 0,
                sums: vec![None; counters.len()],
            });
        if by_process {
            row.pid = r.get(1).at(&path)?;
        }
        row.count = row.count.max(r.get::<_, i64>(5).at(&path)?.max(0) as u64);
        add_sum(row, i, r.get(4).at(&path)?);
    }
    Ok(out.into_values().collect())
}

/// Per function: the sum of each counter's change over the samples whose
/// innermost frame it is (each sample carries the change since the
/// thread's previous sample). Sorted by name (per process with
/// `by_process`).
pub fn function_counter_summary(
    p: &Profile,
    counters: &[(String, String)],
    by_process: bool,
) -> Result<Vec<CounterSumRow>> {
    // One process at a time, on its own tables (the join needs SQLite's
    // automatic index on each process's samples; across every process at
    // once it would be one join over all of them), in guid order.
    let (lo, hi) = p.window();
    let mut window = Vec::new();
    if let Some(lo) = lo {
        window.push(format!("CS.timestamp >= {lo}"));
    }
    if let Some(hi) = hi {
        window.push(format!("CS.timestamp <= {hi}"));
    }
    let window: String = window.iter().map(|w| format!(" AND {w}")).collect();
    let mut sets: Vec<(usize, crate::schema::TableSet, String)> = p
        .table_sets()
        .into_iter()
        .enumerate()
        .map(|(k, (ts, guid))| (k, ts, guid))
        .collect();
    sets.sort_by(|a, b| a.2.cmp(&b.2));
    let mut out: std::collections::BTreeMap<(Option<String>, String), CounterSumRow> =
        Default::default();
    let mut grouped: Vec<(String, i64, Option<i64>, String, f64, i64)> = Vec::new();
    // Samples per (process, leaf), counted once (every counter's row has
    // the same samples); kept for one process at a time.
    let mut counted: HashSet<(String, Option<i64>)> = HashSet::new();
    for (k, ts, guid) in &sets {
        grouped.clear();
        counted.clear();
        let (sc, sf) = (&ts.schema, &ts.suffix);
        let sql = format!(
            "SELECT MIN(P.pid), E.stack_id, PI.name, SUM(CS.value), COUNT(*) \
             FROM \"{sc}\".\"strobe_counter_sample{sf}\" CS \
               JOIN \"{sc}\".\"rocpd_info_pmc{sf}\" PI ON PI.id = CS.pmc_id \
               JOIN \"{sc}\".\"rocpd_info_process{sf}\" P ON P.id = PI.pid \
               JOIN \"{sc}\".\"rocpd_sample{sf}\" S ON S.track_id = CS.track_id \
                 AND S.timestamp = CS.timestamp \
               JOIN \"{sc}\".\"rocpd_event{sf}\" E ON E.id = S.event_id \
             WHERE json_extract(PI.extdata, '$.strobe') = 'sampling_events'{window} \
             GROUP BY E.stack_id, PI.name"
        );
        let path = p.set_file(*k).to_path_buf();
        p.with_set_connection(*k, |conn| {
            let mut st = conn.prepare_cached(&sql).at(&path)?;
            let mut rows = st.query([]).at(&path)?;
            while let Some(r) = rows.next().at(&path)? {
                grouped.push((
                    guid.clone(),
                    r.get(0).at(&path)?,
                    r.get(1).at(&path)?,
                    r.get(2).at(&path)?,
                    r.get(3).at(&path)?,
                    r.get(4).at(&path)?,
                ));
            }
            Ok(())
        })?;
        for (guid, pid, stack, counter, sum, n) in grouped.drain(..) {
            let Some(i) = counters.iter().position(|(c, _)| *c == counter) else {
                continue;
            };
            let frames = match stack {
                Some(s) => p.resolve_stack(&guid, s)?,
                None => Vec::new(),
            };
            let leaf = frames
                .first()
                .map_or_else(|| "[no stack]".to_string(), |f| f.display_name());
            let gk = by_process.then(|| guid.clone());
            let row = out
                .entry((gk.clone(), leaf.clone()))
                .or_insert_with(|| CounterSumRow {
                    pid: by_process.then_some(pid),
                    guid: gk,
                    name: leaf,
                    count: 0,
                    sums: vec![None; counters.len()],
                });
            if counted.insert((guid, stack)) {
                row.count += n.max(0) as u64;
            }
            add_sum(row, i, Some(sum));
        }
    }
    Ok(out.into_values().collect())
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

/// The metric definitions the profile's processes stored, each name once
/// (the first process's), requested ones in the order stored.
pub fn stored_metrics(p: &Profile) -> Result<Vec<StoredMetric>> {
    let path = p.files().first().cloned().unwrap_or_default();
    let mut st = p
        .connection()
        .prepare(
            "SELECT name, kind, expression, unit, description, requested FROM strobe_metric \
             ORDER BY guid, id",
        )
        .at(&path)?;
    let mut rows = st.query([]).at(&path)?;
    let mut out: Vec<StoredMetric> = Vec::new();
    while let Some(r) = rows.next().at(&path)? {
        let name: String = r.get(0).at(&path)?;
        if out.iter().any(|m| m.name == name) {
            continue;
        }
        out.push(StoredMetric {
            name,
            kind: r.get(1).at(&path)?,
            expression: r.get(2).at(&path)?,
            unit: r.get(3).at(&path)?,
            description: r.get(4).at(&path)?,
            requested: r.get::<_, i64>(5).at(&path)? != 0,
        });
    }
    Ok(out)
}
