//! The summary tables of a profile read in place, one process at a time.
//!
//! Owns computing every table of [`crate::summary::tables`] for a profile
//! of more than [`crate::reader::MAX_ATTACHED`] files (see
//! [`crate::federation`]) in one pass over its processes instead of one
//! pass per query: each process's database is opened once, on a worker's
//! connection (two to four at a time, see [`crate::scan`]), its part of
//! every table computed there natively from the same view definitions the
//! profile uses, and the parts are folded together in process order. Sums,
//! counts, minima and maxima combine; medians and deviations need every
//! duration in order, so region durations are spilled to a temporary
//! database (on disk, deleted when done) and summarised there with the same
//! code as an attached profile. Memory grows with distinct names, threads
//! and one process's rows, never with the number of processes (except the
//! rows `--by-process` asks for). It never prints and never writes to an
//! input.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use rusqlite::Connection;

use super::functions::FunctionFold;
use super::regions::duration_summary_on;
use super::rows::{CounterSumRow, StatRow, StoredMetric, Tables, ThreadRow, Want};
use super::threads::{finish_threads, name_main_threads, unnamed_main};
use super::weights::Weights;
use crate::error::{Result, SqlContext};
use crate::federation::{optional_tables, Definitions, Federation, Unit};
use crate::parallel::ordered_parallel;
use crate::reader::{Profile, StackCache};
use crate::scan::ProcessSamples;
use crate::schema::{TableSet, ViewWindow};

/// A region row: guid and pid (with `--by-process`), name, duration.
type RegionRow = (Option<String>, Option<i64>, Option<String>, i64);

/// A region counter's partial sums: pid, sum, regions counted.
type RegionCounterPart = (Option<i64>, Option<f64>, u64);

/// One process's part of every table.
#[derive(Default)]
struct Part {
    /// Region rows (guid and pid only with `--by-process`), name, duration.
    regions: Vec<RegionRow>,
    threads: Vec<ThreadRow>,
    /// (tid, regions, summed duration).
    thread_regions: Vec<(i64, u64, i64)>,
    samples: Option<ProcessSamples>,
    /// (guid, id, name, unit) of the counters read per thread.
    counters: Vec<(String, i64, String, String)>,
    /// (guid, id, definition).
    metrics: Vec<(String, i64, StoredMetric)>,
    /// (name, counter) → (pid, sum, regions).
    region_counters: Vec<(String, String, RegionCounterPart)>,
    /// (pid, stack, leaf name, counter, sum, samples).
    function_counters: Vec<(i64, Option<i64>, String, String, f64, i64)>,
}

/// What every worker needs to compute a part.
struct Job<'a> {
    units: &'a [Unit],
    defs: &'a Definitions,
    window: ViewWindow,
    want: Want,
    time_kind: crate::SampleKind,
    period: u64,
}

impl Job<'_> {
    /// Process `k`'s part, on a connection of its own.
    fn part(&self, k: usize) -> Result<Part> {
        let unit = &self.units[k];
        let ts = TableSet {
            schema: "main".into(),
            suffix: unit.suffix.clone(),
        };
        crate::scan::with_file(&unit.file, &ts, |conn| self.part_on(conn, k, &ts))
    }

    /// Process `k`'s part, read on `conn` (its file, as `main`).
    fn part_on(&self, conn: &Connection, k: usize, ts: &TableSet) -> Result<Part> {
        let unit = &self.units[k];
        let path = unit.file.as_path();
        let optional = optional_tables(conn, &unit.suffix).at(path)?;
        let sql = |object: &str, select: &str, filter: &str| {
            self.defs.unit_sql(
                &unit.suffix,
                &optional,
                &self.window,
                object,
                select,
                filter,
            )
        };
        let by = self.want.by_process;
        let mut part = Part::default();
        if self.want.regions {
            let q = sql("regions", "guid, pid, name, duration", "");
            each_row(conn, path, &q, |r| {
                part.regions.push((
                    if by { r.get(0)? } else { None },
                    if by { r.get(1)? } else { None },
                    r.get(2)?,
                    r.get(3)?,
                ));
                Ok(())
            })?;
        }
        if self.want.threads {
            let q = sql("threads", "guid, pid, tid, name, start, \"end\"", "");
            each_row(conn, path, &q, |r| {
                let (s, e): (Option<i64>, Option<i64>) = (r.get(4)?, r.get(5)?);
                part.threads.push(ThreadRow::listed(
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    (s, e),
                ));
                Ok(())
            })?;
            if part.threads.iter().any(unnamed_main) {
                let mut commands = Vec::new();
                each_row(conn, path, &sql("processes", "guid, command", ""), |r| {
                    commands.push((r.get(0)?, r.get(1)?));
                    Ok(())
                })?;
                name_main_threads(&mut part.threads, &commands);
            }
            let q = sql(
                "regions",
                "tid, COUNT(*), SUM(duration)",
                " GROUP BY guid, tid",
            );
            each_row(conn, path, &q, |r| {
                part.thread_regions
                    .push((r.get(0)?, r.get::<_, i64>(1)?.max(0) as u64, r.get(2)?));
                Ok(())
            })?;
        }
        if self.want.functions || self.want.threads {
            let t = crate::scan::tally(
                conn,
                "main",
                &unit.suffix,
                (self.window.start, self.window.end),
                (None, None),
            )?;
            let guid: Arc<str> = Arc::from(unit.guid.as_str());
            part.samples = Some(crate::scan::map_tally(
                conn,
                ts,
                k,
                &guid,
                path,
                t,
                self.time_kind,
                self.period,
                self.want.functions,
            )?);
        }
        let q = sql(
            "rocpd_info_pmc",
            "guid, id, name, COALESCE(units, '')",
            " WHERE json_extract(extdata, '$.strobe') = 'sampling_events'",
        );
        each_row(conn, path, &q, |r| {
            part.counters
                .push((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?));
            Ok(())
        })?;
        let q = sql(
            "strobe_metric",
            "guid, id, name, kind, expression, unit, description, requested",
            "",
        );
        each_row(conn, path, &q, |r| {
            part.metrics.push((
                r.get(0)?,
                r.get(1)?,
                StoredMetric {
                    name: r.get(2)?,
                    kind: r.get(3)?,
                    expression: r.get(4)?,
                    unit: r.get(5)?,
                    description: r.get(6)?,
                    requested: r.get::<_, i64>(7)? != 0,
                },
            ));
            Ok(())
        })?;
        if self.want.regions {
            let q = sql(
                "strobe_region_counters",
                "MIN(pid), name, counter, SUM(value), COUNT(DISTINCT region_id)",
                " GROUP BY name, counter",
            );
            each_row(conn, path, &q, |r| {
                part.region_counters.push((
                    r.get::<_, Option<String>>(1)?.unwrap_or_default(),
                    r.get(2)?,
                    (r.get(0)?, r.get(3)?, r.get::<_, i64>(4)?.max(0) as u64),
                ));
                Ok(())
            })?;
        }
        if self.want.functions {
            self.function_counters(conn, path, ts, k, &unit.guid, &mut part)?;
        }
        Ok(part)
    }

    /// The counter sums per stack of the samples (the query
    /// [`crate::summary::function_counter_summary`] runs per process),
    /// each stack named by its innermost frame.
    fn function_counters(
        &self,
        conn: &Connection,
        path: &Path,
        ts: &TableSet,
        k: usize,
        guid: &str,
        part: &mut Part,
    ) -> Result<()> {
        let sf = &ts.suffix;
        let mut window = String::new();
        if let Some(lo) = self.window.start {
            window.push_str(&format!(" AND CS.timestamp >= {lo}"));
        }
        if let Some(hi) = self.window.end {
            window.push_str(&format!(" AND CS.timestamp <= {hi}"));
        }
        let q = format!(
            "SELECT MIN(P.pid), E.stack_id, PI.name, SUM(CS.value), COUNT(*) \
             FROM main.\"strobe_counter_sample{sf}\" CS \
               JOIN main.\"rocpd_info_pmc{sf}\" PI ON PI.id = CS.pmc_id \
               JOIN main.\"rocpd_info_process{sf}\" P ON P.id = PI.pid \
               JOIN main.\"rocpd_sample{sf}\" S ON S.track_id = CS.track_id \
                 AND S.timestamp = CS.timestamp \
               JOIN main.\"rocpd_event{sf}\" E ON E.id = S.event_id \
             WHERE json_extract(PI.extdata, '$.strobe') = 'sampling_events'{window} \
             GROUP BY E.stack_id, PI.name"
        );
        let mut rows = Vec::new();
        each_row(conn, path, &q, |r| {
            rows.push((
                r.get::<_, i64>(0)?,
                r.get::<_, Option<i64>>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, f64>(3)?,
                r.get::<_, i64>(4)?,
            ));
            Ok(())
        })?;
        let mut cache = StackCache::default();
        for (pid, stack, counter, sum, n) in rows {
            let leaf = match stack {
                Some(s) => cache
                    .resolve(conn, ts, k, guid, path, s)?
                    .first()
                    .map(|f| f.display_name()),
                None => None,
            }
            .unwrap_or_else(|| "[no stack]".to_string());
            part.function_counters
                .push((pid, stack, leaf, counter, sum, n));
        }
        Ok(())
    }
}

/// Runs `sql` on `conn`, calling `f` with each row.
fn each_row(
    conn: &Connection,
    path: &Path,
    sql: &str,
    mut f: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<()>,
) -> Result<()> {
    let mut st = conn.prepare(sql).at(path)?;
    let mut rows = st.query([]).at(path)?;
    while let Some(r) = rows.next().at(path)? {
        f(r).at(path)?;
    }
    Ok(())
}

/// Region durations of every process, on disk until summarised.
struct Spill {
    conn: Connection,
}

impl Spill {
    fn new() -> Result<Spill> {
        let path = Path::new("<temporary database>");
        // An empty name is a private temporary database on disk, removed
        // when the connection closes.
        let conn = Connection::open("").at(path)?;
        conn.execute_batch(
            "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA cache_size = -8192;
             CREATE TABLE d (guid TEXT, pid INTEGER, name TEXT, duration INTEGER);
             BEGIN;",
        )
        .at(path)?;
        Ok(Spill { conn })
    }

    fn add(&self, rows: &[RegionRow]) -> Result<()> {
        let path = Path::new("<temporary database>");
        let mut st = self
            .conn
            .prepare_cached("INSERT INTO d (guid, pid, name, duration) VALUES (?1, ?2, ?3, ?4)")
            .at(path)?;
        for (g, p, n, d) in rows {
            st.execute(rusqlite::params![g, p, n, d]).at(path)?;
        }
        Ok(())
    }

    /// The region table of every duration spilled (`by`: per process).
    fn summary(self, by: bool) -> Result<Vec<StatRow>> {
        let path = Path::new("<temporary database>");
        self.conn.execute_batch("COMMIT").at(path)?;
        duration_summary_on(&self.conn, path, "d", "name", "duration", by)
    }
}

/// Every table `want` asks for over the processes of `fed`, in one pass
/// (see the module documentation). `p` is the profile `fed` belongs to.
pub(super) fn tables(p: &Profile, fed: &Federation, want: Want) -> Result<Tables> {
    let time_kind = p.time_kind()?;
    let period = p.sampling_period_ns().max(0) as u64;
    let defs = fed.definitions();
    let units = fed.units();
    let job = Job {
        units,
        defs: &defs,
        window: fed.window(),
        want,
        time_kind,
        period,
    };
    let mut fold = Fold::new(units, want)?;
    let work = |k: usize| job.part(k);
    ordered_parallel(units.len(), &work, &mut |k, part: Part| {
        fed.report("summary", k + 1);
        fold.add(k, part)
    })?;
    fed.report("summary", units.len());
    fold.finish()
}

/// A function counter's sums: (group, leaf) → (pid, counter → sum,
/// samples).
type FnCounters = (Option<i64>, HashMap<String, f64>, u64);

/// The processes' parts folded together, in process order.
struct Fold<'a> {
    units: &'a [Unit],
    want: Want,
    /// The region durations, when the region table is wanted.
    spill: Option<Spill>,
    functions: FunctionFold,
    threads: HashMap<(String, i64), ThreadRow>,
    counters: Vec<(String, i64, String, String)>,
    metrics: Vec<(String, i64, StoredMetric)>,
    region_counters: HashMap<(Option<String>, String, String), RegionCounterPart>,
    function_counters: HashMap<(Option<String>, String), FnCounters>,
}

impl<'a> Fold<'a> {
    fn new(units: &'a [Unit], want: Want) -> Result<Fold<'a>> {
        Ok(Fold {
            units,
            want,
            spill: if want.regions {
                Some(Spill::new()?)
            } else {
                None
            },
            functions: FunctionFold::default(),
            threads: HashMap::new(),
            counters: Vec::new(),
            metrics: Vec::new(),
            region_counters: HashMap::new(),
            function_counters: HashMap::new(),
        })
    }

    /// Folds in process `k`'s part.
    fn add(&mut self, k: usize, part: Part) -> Result<()> {
        let Part {
            regions,
            threads,
            thread_regions,
            samples,
            counters,
            metrics,
            region_counters,
            function_counters,
        } = part;
        let guid = &self.units[k].guid;
        if let Some(s) = &self.spill {
            s.add(&regions)?;
        }
        self.add_threads(guid, threads, thread_regions);
        if let Some(ps) = &samples {
            self.add_samples(guid, ps);
        }
        self.counters.extend(counters);
        self.metrics.extend(metrics);
        let gk = self.want.by_process.then(|| guid.clone());
        self.add_region_counters(&gk, region_counters);
        self.add_function_counters(&gk, function_counters);
        Ok(())
    }

    /// The process's threads, with the regions recorded on each.
    fn add_threads(
        &mut self,
        guid: &str,
        threads: Vec<ThreadRow>,
        thread_regions: Vec<(i64, u64, i64)>,
    ) {
        for t in threads {
            self.threads.insert((t.guid.clone(), t.tid), t);
        }
        for (tid, n, total) in thread_regions {
            if let Some(t) = self.threads.get_mut(&(guid.to_string(), tid)) {
                t.regions = n;
                t.region_total_ns = total;
            }
        }
    }

    /// The process's samples: into the function table, and summed per
    /// thread into the thread table.
    fn add_samples(&mut self, guid: &str, ps: &ProcessSamples) {
        if self.want.functions {
            self.functions.add(ps, self.want.by_process);
        }
        if self.want.threads {
            let mut per_thread: HashMap<i64, Weights> = HashMap::new();
            for g in &ps.groups {
                per_thread.entry(g.tid).or_default().add(&Weights {
                    samples: g.samples,
                    ns: g.cpu_ns,
                    off_cpu_ns: g.off_cpu_ns,
                });
            }
            for (tid, w) in per_thread {
                if let Some(t) = self.threads.get_mut(&(guid.to_string(), tid)) {
                    t.samples = w.samples;
                    t.sampled_ns = w.ns;
                    t.off_cpu_ns = w.off_cpu_ns;
                }
            }
        }
    }

    /// The process's region counter sums, in group `gk`.
    fn add_region_counters(
        &mut self,
        gk: &Option<String>,
        rows: Vec<(String, String, RegionCounterPart)>,
    ) {
        for (name, counter, (pid, sum, n)) in rows {
            let e = self
                .region_counters
                .entry((gk.clone(), name, counter))
                .or_insert((None, None, 0));
            if self.want.by_process {
                e.0 = pid;
            }
            if let Some(v) = sum {
                e.1 = Some(e.1.unwrap_or(0.0) + v);
            }
            e.2 += n;
        }
    }

    /// The process's function counter sums, in group `gk`: the samples of
    /// each stack counted once, whatever the counters.
    fn add_function_counters(
        &mut self,
        gk: &Option<String>,
        rows: Vec<(i64, Option<i64>, String, String, f64, i64)>,
    ) {
        let by = self.want.by_process;
        let mut counted: HashSet<Option<i64>> = HashSet::new();
        for (pid, stack, leaf, counter, sum, n) in rows {
            let e = self.function_counters.entry((gk.clone(), leaf)).or_insert((
                by.then_some(pid),
                HashMap::new(),
                0,
            ));
            if counted.insert(stack) {
                e.2 += n.max(0) as u64;
            }
            *e.1.entry(counter).or_insert(0.0) += sum;
        }
    }

    /// Every table, from what was folded in.
    fn finish(self) -> Result<Tables> {
        let (want, by) = (self.want, self.want.by_process);
        let names = counters_in_order(self.counters);
        let stored = metrics_in_order(self.metrics);
        let regions = match self.spill {
            Some(s) => Some(s.summary(by)?),
            None => None,
        };
        let region_counters = (want.regions && !names.is_empty())
            .then(|| region_counter_rows(self.region_counters, &names, by));
        let function_counters = (want.functions && !names.is_empty())
            .then(|| function_counter_rows(self.function_counters, &names));
        Ok(Tables {
            regions,
            functions: want.functions.then(|| self.functions.finish()),
            threads: want.threads.then(|| finish_threads(self.threads, by)),
            metrics: if names.is_empty() { Vec::new() } else { stored },
            counters: names,
            region_counters,
            function_counters,
        })
    }
}

/// The counters read per thread, (name, unit), in the order they were
/// first described (by process guid, then id), each name once.
fn counters_in_order(mut counters: Vec<(String, i64, String, String)>) -> Vec<(String, String)> {
    counters.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    let mut names: Vec<(String, String)> = Vec::new();
    for (_, _, name, unit) in counters {
        if !names.iter().any(|(n, _)| *n == name) {
            names.push((name, unit));
        }
    }
    names
}

/// The stored metric definitions in the order stored (by process guid,
/// then id), each name once (the first process's).
fn metrics_in_order(mut metrics: Vec<(String, i64, StoredMetric)>) -> Vec<StoredMetric> {
    metrics.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    let mut stored: Vec<StoredMetric> = Vec::new();
    for (_, _, m) in metrics {
        if !stored.iter().any(|x| x.name == m.name) {
            stored.push(m);
        }
    }
    stored
}

/// The region counter table: one row per (group, name), a sum per counter
/// of `names`, sorted by group and name.
fn region_counter_rows(
    parts: HashMap<(Option<String>, String, String), RegionCounterPart>,
    names: &[(String, String)],
    by: bool,
) -> Vec<CounterSumRow> {
    let mut out: std::collections::BTreeMap<(Option<String>, String), CounterSumRow> =
        Default::default();
    for ((gk, name, counter), (pid, sum, n)) in parts {
        let Some(i) = names.iter().position(|(c, _)| *c == counter) else {
            continue;
        };
        let row = out
            .entry((gk.clone(), name.clone()))
            .or_insert_with(|| CounterSumRow {
                pid: None,
                guid: gk,
                name,
                count: 0,
                sums: vec![None; names.len()],
            });
        if by {
            row.pid = pid;
        }
        row.count = row.count.max(n);
        if let Some(v) = sum {
            row.sums[i] = Some(row.sums[i].unwrap_or(0.0) + v);
        }
    }
    out.into_values().collect()
}

/// The function counter table: one row per (group, leaf) with a sum of
/// a counter of `names`, sorted by group and name.
fn function_counter_rows(
    parts: HashMap<(Option<String>, String), FnCounters>,
    names: &[(String, String)],
) -> Vec<CounterSumRow> {
    let mut out: Vec<CounterSumRow> = parts
        .into_iter()
        .filter_map(|((gk, name), (pid, sums, count))| {
            let mut row = CounterSumRow {
                pid,
                guid: gk,
                name,
                count,
                sums: vec![None; names.len()],
            };
            let mut any = false;
            for (counter, v) in sums {
                if let Some(i) = names.iter().position(|(c, _)| *c == counter) {
                    row.sums[i] = Some(v);
                    any = true;
                }
            }
            any.then_some(row)
        })
        .collect();
    out.sort_by(|a, b| (&a.guid, &a.name).cmp(&(&b.guid, &b.name)));
    out
}
