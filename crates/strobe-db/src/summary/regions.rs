//! The region table: duration statistics per region name.
//!
//! Owns [`region_summary`] (from the raw region scan's two passes,
//! [`crate::region_scan`]) and [`duration_summary`] (SQLite sorts the
//! durations: a profile read in place, or any view with a name and a
//! duration), and the shares and order of their rows. A time filter's
//! exact counts replace the stored regions' ([`super::counted`]). It never
//! reads samples.

use std::collections::{BTreeMap, HashMap};

use super::counted::counted_calls;
use super::rows::{Counted, StatRow};
use crate::duration_stats::{FirstPass, MedianTarget};
use crate::error::{Result, SqlContext};
use crate::reader::Profile;
use crate::region_scan;

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
pub(super) fn regions_of_scan(
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
    duration_summary_on(p.conn(), &path, view, name_col, dur_col, by_process)
}

/// [`duration_summary`] over a view or table of `conn` (errors name
/// `path`): `view` needs a `guid` and a `pid` column with `by_process`.
pub(super) fn duration_summary_on(
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
