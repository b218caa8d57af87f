//! The raw scan of a profile's regions for the summary.
//!
//! Owns reading `rocpd_region` of every process (a large process in two
//! row-id halves) on reader threads of their own ([`crate::scan`]'s worker
//! pool and connections) without the `regions` view's joins, sort or
//! grouping: per region name the first pass of [`crate::duration_stats`],
//! per thread the regions and their summed time, then a second pass that
//! keeps the durations around each name's median. Rows count exactly as
//! the `regions` view counts them: those with an event, a named string and
//! a known thread, within the profile's time window. It never writes and
//! never formats.

use std::collections::{BTreeMap, HashMap};

use crate::duration_stats::{FirstPass, MedianTarget};
use crate::parallel::ordered_parallel;
use crate::scan::{qerr, with_file, work_items, IdMap, Window};
use crate::{Profile, Result};
use rusqlite::OptionalExtension;

/// The region statistics of a profile, per process set.
pub(crate) struct RegionScan {
    /// Per set: process (OS pid, guid), and per name the statistics.
    pub(crate) sets: Vec<SetRegions>,
    /// How the first pass read the profile: the second reads it the same way.
    plan: Plan,
}

/// One process's regions.
pub(crate) struct SetRegions {
    pub(crate) pid: Option<i64>,
    pub(crate) guid: String,
    /// Name → first-pass statistics.
    pub(crate) names: HashMap<String, FirstPass>,
    /// OS tid → (regions, summed duration).
    pub(crate) threads: HashMap<i64, (u64, i64)>,
    /// Name id → name, thread row → OS tid (for the second pass).
    name_of: IdMap<i64, String>,
    tid_of: IdMap<i64, i64>,
}

/// A work item: a set and a row-id range of its regions.
type Item = (usize, Window);

/// What the reader threads need of a profile (which is not `Sync`): the
/// sets, their files, the window and the work items.
struct Plan {
    sets: Vec<(crate::schema::TableSet, String)>,
    files: Vec<std::path::PathBuf>,
    window: Window,
    work: Vec<Item>,
}

impl Plan {
    fn of(p: &Profile) -> Result<Plan> {
        let sets = p.table_sets();
        Ok(Plan {
            files: (0..sets.len())
                .map(|k| p.set_file(k).to_path_buf())
                .collect(),
            sets,
            window: p.window(),
            work: work_items(p, "rocpd_region")?,
        })
    }

    /// Streams `cols` of item `i`'s regions to `each`.
    fn each_row(
        &self,
        i: usize,
        cols: &str,
        each: &mut dyn FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<()>,
    ) -> Result<()> {
        let (k, rows) = self.work[i];
        let ts = &self.sets[k].0;
        with_file(&self.files[k], ts, |conn| {
            let q = sql(self.window, &ts.schema, &ts.suffix, rows, cols);
            let mut st = conn.prepare(&q).map_err(qerr(&q))?;
            let mut rs = st.query([]).map_err(qerr(&q))?;
            while let Some(r) = rs.next().map_err(qerr(&q))? {
                each(r).map_err(qerr(&q))?;
            }
            Ok(())
        })
    }
}

/// `SELECT <cols>` over the regions of one item that the `regions` view
/// shows (those with an event), within the profile's window.
fn sql(window: Window, sc: &str, sf: &str, rows: Window, cols: &str) -> String {
    let mut wh = vec!["event_id IS NOT NULL".to_string()];
    let (lo, hi) = window;
    if let Some(lo) = lo {
        wh.push(format!("\"end\" >= {lo}"));
    }
    if let Some(hi) = hi {
        wh.push(format!("start <= {hi}"));
    }
    if let Some(a) = rows.0 {
        wh.push(format!("rowid >= {a}"));
    }
    if let Some(b) = rows.1 {
        wh.push(format!("rowid < {b}"));
    }
    format!(
        "SELECT {cols} FROM \"{sc}\".\"rocpd_region{sf}\" WHERE {}",
        wh.join(" AND ")
    )
}

/// Per (name id, thread row) the first pass: the thread is kept so that
/// [`label`] can leave out the rows of unknown threads, as the view's join
/// does, and count each thread's regions.
type Part = IdMap<(i64, i64), FirstPass>;

/// The first pass over every region of `p`.
pub(crate) fn first_pass(p: &Profile) -> Result<RegionScan> {
    let plan = Plan::of(p)?;
    let scan = |i: usize| -> Result<Part> {
        let mut part = Part::default();
        plan.each_row(i, "name_id, tid, \"end\" - start", &mut |r| {
            part.entry((r.get(0)?, r.get(1)?))
                .or_default()
                .add(r.get(2)?);
            Ok(())
        })?;
        Ok(part)
    };
    let mut parts: Vec<Part> = (0..plan.sets.len()).map(|_| Part::default()).collect();
    ordered_parallel(plan.work.len(), &scan, &mut |i, part| {
        let into = &mut parts[plan.work[i].0];
        for (key, f) in part {
            into.entry(key).or_default().merge(&f);
        }
        Ok(())
    })?;
    let mut sets = Vec::with_capacity(plan.sets.len());
    for (k, ((ts, guid), part)) in plan.sets.iter().zip(parts).enumerate() {
        sets.push(p.set_connection(k, |conn| label(conn, &ts.schema, &ts.suffix, guid, part))?);
    }
    Ok(RegionScan { sets, plan })
}

/// Names the ids of one set's first pass and counts each thread's regions
/// (ids without a string, and regions of unknown threads, left out as the
/// view's joins leave them).
fn label(
    conn: &rusqlite::Connection,
    sc: &str,
    sf: &str,
    guid: &str,
    part: Part,
) -> Result<SetRegions> {
    let q = format!("SELECT id, tid FROM \"{sc}\".\"rocpd_info_thread{sf}\"");
    let mut tid_of = IdMap::default();
    {
        let mut st = conn.prepare(&q).map_err(qerr(&q))?;
        let mut rs = st.query([]).map_err(qerr(&q))?;
        while let Some(r) = rs.next().map_err(qerr(&q))? {
            tid_of.insert(r.get(0).map_err(qerr(&q))?, r.get(1).map_err(qerr(&q))?);
        }
    }
    let q = format!("SELECT string FROM \"{sc}\".\"rocpd_string{sf}\" WHERE id = ?1");
    let mut name_of: IdMap<i64, String> = IdMap::default();
    let mut names: HashMap<String, FirstPass> = HashMap::new();
    let mut threads: HashMap<i64, (u64, i64)> = HashMap::new();
    {
        let mut st = conn.prepare(&q).map_err(qerr(&q))?;
        for ((id, thread), f) in part {
            let Some(&tid) = tid_of.get(&thread) else {
                continue;
            };
            let name = match name_of.entry(id) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    match st
                        .query_row([id], |r| r.get(0))
                        .optional()
                        .map_err(qerr(&q))?
                    {
                        Some(name) => e.insert(name),
                        None => continue,
                    }
                }
            };
            names.entry(name.clone()).or_default().merge(&f);
            let t = threads.entry(tid).or_default();
            t.0 += f.n;
            t.1 = t.1.saturating_add(f.total);
        }
    }
    let q = format!("SELECT MIN(pid) FROM \"{sc}\".\"rocpd_info_process{sf}\"");
    let pid = conn.query_row(&q, [], |r| r.get(0)).map_err(qerr(&q))?;
    Ok(SetRegions {
        pid,
        guid: guid.to_string(),
        names,
        threads,
        name_of,
        tid_of,
    })
}

/// The second pass: per set, name → the durations (value → count) that
/// `target` of the set's name wants.
pub(crate) fn second_pass(
    scan: &RegionScan,
    target: &dyn Fn(usize, &str) -> Option<MedianTarget>,
) -> Result<Vec<HashMap<String, BTreeMap<i64, u64>>>> {
    let plan = &scan.plan;
    // Per set: name id → (target, name).
    let wanted: Vec<IdMap<i64, (MedianTarget, &str)>> = scan
        .sets
        .iter()
        .enumerate()
        .map(|(k, s)| {
            s.name_of
                .iter()
                .filter_map(|(id, name)| target(k, name).map(|t| (*id, (t, name.as_str()))))
                .collect()
        })
        .collect();
    let keep = |i: usize| -> Result<IdMap<i64, BTreeMap<i64, u64>>> {
        let k = plan.work[i].0;
        let (want, tids) = (&wanted[k], &scan.sets[k].tid_of);
        let mut kept: IdMap<i64, BTreeMap<i64, u64>> = IdMap::default();
        plan.each_row(i, "name_id, tid, \"end\" - start", &mut |r| {
            let id: i64 = r.get(0)?;
            let Some((t, _)) = want.get(&id) else {
                return Ok(());
            };
            let d: i64 = r.get(2)?;
            if t.wants(d) && tids.contains_key(&r.get::<_, i64>(1)?) {
                *kept.entry(id).or_default().entry(d).or_default() += 1;
            }
            Ok(())
        })?;
        Ok(kept)
    };
    let mut out: Vec<HashMap<String, BTreeMap<i64, u64>>> =
        (0..plan.sets.len()).map(|_| HashMap::new()).collect();
    ordered_parallel(plan.work.len(), &keep, &mut |i, kept| {
        let k = plan.work[i].0;
        for (id, values) in kept {
            let Some((_, name)) = wanted[k].get(&id) else {
                continue;
            };
            let into = out[k].entry(name.to_string()).or_default();
            for (v, c) in values {
                *into.entry(v).or_default() += c;
            }
        }
        Ok(())
    })?;
    Ok(out)
}
