//! Summary tables computed from a profile (Nsight Systems `stats` style).
//!
//! Owns the numbers behind `strobe summary`: per-name region statistics
//! (total, instances, average, median, min, max, standard deviation, share),
//! per-function sample counts (self and inclusive) and per-thread totals.
//! Memory grows with the number of distinct names, call stacks and threads,
//! never with the number of rows: medians and deviations are computed in a
//! second streaming pass over rows sorted by SQLite. It never formats or
//! prints; the CLI, the Python package and exporters share it.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::error::{Result, SqlContext};
use crate::reader::Profile;

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
}

/// One row of the sampled-function summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionRow {
    /// OS pid when grouped by process.
    pub pid: Option<i64>,
    /// Process guid when grouped by process.
    pub guid: Option<String>,
    /// Samples whose innermost frame is this function.
    pub self_samples: u64,
    /// `self_samples` as a percentage of all samples (of the process).
    pub self_pct: f64,
    /// Samples with this function anywhere on the stack (counted once per sample).
    pub total_samples: u64,
    /// `total_samples` as a percentage of all samples (of the process).
    pub total_pct: f64,
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
    /// Thread name.
    pub name: Option<String>,
    /// Samples taken on the thread.
    pub samples: u64,
    /// Share of all samples, in percent (of the process when grouped).
    pub sample_pct: f64,
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
    sq: f64,
}

/// Region statistics per name (per process and name with `by_process`),
/// sorted by total time, largest first.
pub fn region_summary(p: &Profile, by_process: bool) -> Result<Vec<StatRow>> {
    duration_summary(p, "regions", "name", "duration", by_process)
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
    let conn = p.connection();
    let path = p.files().first().cloned().unwrap_or_default();
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
            let dev = d as f64 - a.mean;
            a.sq += dev * dev;
            a.idx += 1;
        }
    }
    let mut group_total: HashMap<Option<String>, i64> = HashMap::new();
    for ((guid, _), a) in &accs {
        *group_total.entry(guid.clone()).or_default() += a.total;
    }
    let mut out: Vec<StatRow> = accs
        .into_iter()
        .map(|((guid, name), a)| {
            let gt = group_total.get(&guid).copied().unwrap_or(0);
            StatRow {
                pid: a.pid,
                time_pct: if gt > 0 {
                    a.total as f64 * 100.0 / gt as f64
                } else {
                    0.0
                },
                total_ns: a.total,
                instances: a.n,
                avg_ns: a.mean,
                med_ns: (a.med_lo + a.med_hi) / 2.0,
                min_ns: a.min,
                max_ns: a.max,
                stddev_ns: if a.n > 1 {
                    (a.sq / (a.n - 1) as f64).sqrt()
                } else {
                    0.0
                },
                guid,
                name,
            }
        })
        .collect();
    out.sort_by(|a, b| {
        a.guid
            .cmp(&b.guid)
            .then(b.total_ns.cmp(&a.total_ns))
            .then(a.name.cmp(&b.name))
    });
    Ok(out)
}

/// Sampled functions: self and inclusive sample counts per function name
/// (per process with `by_process`), sorted by self samples, then inclusive.
pub fn function_summary(p: &Profile, by_process: bool) -> Result<Vec<FunctionRow>> {
    let conn = p.connection();
    let path = p.files().first().cloned().unwrap_or_default();
    let mut selfc: HashMap<(Option<String>, String), u64> = HashMap::new();
    let mut incl: HashMap<(Option<String>, String), u64> = HashMap::new();
    let mut totals: HashMap<Option<String>, u64> = HashMap::new();
    let mut pids: HashMap<String, i64> = HashMap::new();
    let mut st = conn
        .prepare("SELECT guid, MIN(pid), stack_id, COUNT(*) FROM samples GROUP BY guid, stack_id")
        .at(&path)?;
    let mut rows = st.query([]).at(&path)?;
    let mut names = HashSet::new();
    while let Some(r) = rows.next().at(&path)? {
        let guid: String = r.get(0).at(&path)?;
        let pid: i64 = r.get(1).at(&path)?;
        let stack: Option<i64> = r.get(2).at(&path)?;
        let n = r.get::<_, i64>(3).at(&path)? as u64;
        pids.insert(guid.clone(), pid);
        let gk = by_process.then(|| guid.clone());
        *totals.entry(gk.clone()).or_default() += n;
        let frames = match stack {
            Some(s) => p.resolve_stack(&guid, s)?,
            None => Vec::new(),
        };
        let leaf = frames
            .first()
            .map_or_else(|| "[no stack]".to_string(), |f| f.display_name());
        *selfc.entry((gk.clone(), leaf.clone())).or_default() += n;
        names.clear();
        if frames.is_empty() {
            names.insert(leaf);
        }
        for f in &frames {
            names.insert(f.display_name());
        }
        for name in names.drain() {
            *incl.entry((gk.clone(), name)).or_default() += n;
        }
    }
    let mut out: Vec<FunctionRow> = incl
        .into_iter()
        .map(|((guid, name), total)| {
            let s = selfc
                .get(&(guid.clone(), name.clone()))
                .copied()
                .unwrap_or(0);
            let all = totals.get(&guid).copied().unwrap_or(0).max(1) as f64;
            FunctionRow {
                pid: guid.as_ref().and_then(|g| pids.get(g).copied()),
                self_samples: s,
                self_pct: s as f64 * 100.0 / all,
                total_samples: total,
                total_pct: total as f64 * 100.0 / all,
                guid,
                name,
            }
        })
        .collect();
    out.sort_by(|a, b| {
        a.guid
            .cmp(&b.guid)
            .then(b.self_samples.cmp(&a.self_samples))
            .then(b.total_samples.cmp(&a.total_samples))
            .then(a.name.cmp(&b.name))
    });
    Ok(out)
}

/// Per-thread totals: samples (and share), regions and their summed time,
/// lifetime. Shares are of all samples (of the thread's process with
/// `by_process`). Sorted by samples, then region time.
pub fn thread_summary(p: &Profile, by_process: bool) -> Result<Vec<ThreadRow>> {
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
                    sample_pct: 0.0,
                    regions: 0,
                    region_total_ns: 0,
                    lifetime_ns: s.zip(e).map(|(s, e)| e - s),
                },
            );
        }
    }
    {
        let mut st = conn
            .prepare("SELECT guid, tid, COUNT(*) FROM samples GROUP BY guid, tid")
            .at(&path)?;
        let mut q = st.query([]).at(&path)?;
        while let Some(r) = q.next().at(&path)? {
            let key = (
                r.get::<_, String>(0).at(&path)?,
                r.get::<_, i64>(1).at(&path)?,
            );
            if let Some(t) = rows.get_mut(&key) {
                t.samples = r.get::<_, i64>(2).at(&path)? as u64;
            }
        }
    }
    {
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
    let mut totals: HashMap<Option<String>, u64> = HashMap::new();
    for t in rows.values() {
        *totals
            .entry(by_process.then(|| t.guid.clone()))
            .or_default() += t.samples;
    }
    let mut out: Vec<ThreadRow> = rows.into_values().collect();
    for t in &mut out {
        let all = totals
            .get(&by_process.then(|| t.guid.clone()))
            .copied()
            .unwrap_or(0);
        t.sample_pct = if all > 0 {
            t.samples as f64 * 100.0 / all as f64
        } else {
            0.0
        };
    }
    out.sort_by(|a, b| {
        let ga = by_process.then_some(&a.guid);
        let gb = by_process.then_some(&b.guid);
        ga.cmp(&gb)
            .then(b.samples.cmp(&a.samples))
            .then(b.region_total_ns.cmp(&a.region_total_ns))
            .then(a.pid.cmp(&b.pid))
            .then(a.tid.cmp(&b.tid))
    });
    Ok(out)
}
