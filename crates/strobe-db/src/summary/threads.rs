//! The thread table: samples, regions and lifetime per thread.
//!
//! Owns [`thread_summary`], naming a main thread the database has no name
//! for after its program, and the shares and order of the thread rows. It
//! never reads samples itself (the sample weights come from
//! [`super::weights`]).

use std::collections::HashMap;

use super::counted::counted_calls;
use super::rows::ThreadRow;
use super::weights::{thread_weights, WeightGroup, Weights};
use crate::error::{Result, SqlContext};
use crate::reader::Profile;
use crate::region_scan;

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
pub(super) fn threads_of(
    p: &Profile,
    weights: Vec<WeightGroup>,
    regions: Option<&region_scan::RegionScan>,
    by_process: bool,
) -> Result<Vec<ThreadRow>> {
    let conn = p.conn();
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
                ThreadRow::listed(guid, r.get(1).at(&path)?, tid, r.get(3).at(&path)?, (s, e)),
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
pub(super) fn unnamed_main(t: &ThreadRow) -> bool {
    t.tid == t.pid && t.name.as_deref().is_none_or(str::is_empty)
}

/// Names each main thread without a recorded name after its process's
/// program (`commands`: (guid, command line) of the processes; the
/// program's file name, as the kernel names a main thread, untruncated).
/// Databases from before the collector recorded a main thread's name have
/// none, nor has a thread only the kernel sampled that was gone before its
/// name could be read.
pub(super) fn name_main_threads<'a>(
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

/// The thread rows with their shares, sorted (what [`thread_summary`]
/// returns).
pub(super) fn finish_threads(
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
