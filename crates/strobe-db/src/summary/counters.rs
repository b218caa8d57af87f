//! The counter tables: counters read per thread, their sums per region
//! name and per function, and the stored metric definitions.
//!
//! Owns [`profile_counters`], [`region_counter_summary`],
//! [`function_counter_summary`] and [`stored_metrics`]. It never computes a
//! metric from the sums (the CLI does, with `strobe-metrics`).

use std::collections::HashSet;

use super::rows::{CounterSumRow, StoredMetric};
use crate::error::{Result, SqlContext};
use crate::reader::Profile;

/// The counters a profile read per thread (`sampling_events`, see
/// `docs/metrics.md`, Counters in profiles): `(name, unit)`, in the order
/// they were first described. Empty when it read none.
pub fn profile_counters(p: &Profile) -> Result<Vec<(String, String)>> {
    let path = p.files().first().cloned().unwrap_or_default();
    let mut st = p
        .conn()
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
        .conn()
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
        p.set_connection(*k, |conn| {
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

/// The metric definitions the profile's processes stored, each name once
/// (the first process's), requested ones in the order stored.
pub fn stored_metrics(p: &Profile) -> Result<Vec<StoredMetric>> {
    let path = p.files().first().cloned().unwrap_or_default();
    let mut st = p
        .conn()
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
