//! What the exporters read from a profile, in the shapes they need.
//!
//! Owns the export-side queries over [`strobe_db::Profile`]: processes,
//! threads, modules (small tables, loaded whole), and the time-ordered
//! streams of regions (with correlation ids and arguments) and counters,
//! plus the per-process clock shift that aligns processes from several
//! nodes, and the sample aggregation (counts and weights per stack, on and
//! off CPU) that pprof and folded stacks share. Everything large is streamed one row at a time; SQLite sorts
//! and spills to temporary files. It never writes to an input and never
//! formats output.

use std::collections::HashMap;
use std::sync::Arc;

use strobe_db::stream::RowStream;
use strobe_db::Profile;

use crate::error::Result;
use strobe_db::scan::{open_attached, qerr, split_point};

/// A process of the profile.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ProcessRow {
    /// Process guid (names the process across files).
    pub guid: String,
    /// OS pid.
    pub pid: i64,
    /// OS parent pid.
    pub ppid: i64,
    /// Command line, arguments joined by spaces.
    pub command: String,
    /// Machine id of the node.
    pub machine_id: String,
    /// Host name of the node.
    pub hostname: String,
    /// Process start (ns, `CLOCK_MONOTONIC` of its node).
    pub start: Option<i64>,
    /// `CLOCK_REALTIME − CLOCK_MONOTONIC` of its node in ns, from the clock
    /// snapshot the writer recorded (`strobe_settings` `clock.*`), if any.
    pub realtime_minus_monotonic: Option<i64>,
    /// Process end (ns), NULL for a killed writer.
    pub end: Option<i64>,
    /// The MPI job and world rank (`strobe_settings` `mpi.job`,
    /// `mpi.rank`), for a rank of an MPI job.
    pub mpi: Option<(String, i64)>,
    /// Its clock comparisons with rank 0 (`strobe_clock_sync`): local
    /// time, offset, round trip (ns).
    pub clock_sync: Vec<(i64, i64, i64)>,
}

impl ProcessRow {
    /// A short display name: the executable's file name.
    pub fn short_name(&self) -> String {
        let exe = self.command.split_whitespace().next().unwrap_or("");
        let base = exe.rsplit('/').next().unwrap_or(exe);
        if base.is_empty() {
            format!("pid {}", self.pid)
        } else {
            base.to_string()
        }
    }
}

/// Identity of a frame within a process: guid, module path, pc relative
/// to the module, function name (when symbolized).
pub type FrameKey = (String, Option<Arc<str>>, u64, Option<Arc<str>>);

/// A loaded module (executable or shared library) of a process.
#[derive(Debug, Clone, PartialEq)]
pub struct ModuleRow {
    /// Process guid.
    pub guid: String,
    /// Path.
    pub path: Arc<str>,
    /// GNU build id (hex), if known.
    pub build_id: Option<String>,
    /// Load address.
    pub load_address: u64,
    /// Mapped size.
    pub size: u64,
}

/// A region (or, when `start == end`, an instant marker) with everything
/// the timeline formats show. Names are shared (`Arc`) so that streaming
/// millions of regions allocates nothing per row for them.
#[derive(Debug, Clone, PartialEq)]
pub struct RegionRow {
    /// Process guid.
    pub guid: Arc<str>,
    /// OS pid.
    pub pid: i64,
    /// OS tid.
    pub tid: i64,
    /// Name.
    pub name: Arc<str>,
    /// Category, if any.
    pub category: Option<Arc<str>>,
    /// Start (ns).
    pub start: i64,
    /// End (ns).
    pub end: i64,
    /// Correlation id linking related events (flows), if any.
    pub corr_id: Option<i64>,
    /// Arguments as `(name, type, value)`, in position order.
    pub args: Vec<(String, String, String)>,
}

impl RegionRow {
    /// Whether this is an instant marker (zero duration).
    pub fn is_marker(&self) -> bool {
        self.end == self.start
    }
}

/// Loads every process (a small table).
pub fn processes(p: &Profile) -> Result<Vec<ProcessRow>> {
    let rows = p.query_stream(
        "SELECT guid, pid, ppid, command, machine_id, hostname, start, \"end\", \
           (SELECT CAST(r.value AS INTEGER) - CAST(m.value AS INTEGER) FROM strobe_settings r, strobe_settings m \
             WHERE r.guid = processes.guid AND m.guid = processes.guid \
               AND r.name = 'clock.realtime_ns' AND m.name = 'clock.monotonic_ns'), \
           (SELECT value FROM strobe_settings WHERE guid = processes.guid AND name = 'mpi.job'), \
           (SELECT CAST(value AS INTEGER) FROM strobe_settings WHERE guid = processes.guid AND name = 'mpi.rank'), \
           (SELECT group_concat(local_ns || ' ' || offset_ns || ' ' || rtt_ns, ',') FROM strobe_clock_sync \
             WHERE guid = processes.guid) \
         FROM processes ORDER BY start, guid",
        |r| {
            Ok(ProcessRow {
                guid: r.get(0)?,
                pid: r.get::<_, Option<i64>>(1)?.unwrap_or(0),
                ppid: r.get::<_, Option<i64>>(2)?.unwrap_or(0),
                command: r.get::<_, Option<String>>(3)?.unwrap_or_default(),
                machine_id: r.get::<_, Option<String>>(4)?.unwrap_or_default(),
                hostname: r.get::<_, Option<String>>(5)?.unwrap_or_default(),
                start: r.get(6)?,
                end: r.get(7)?,
                realtime_minus_monotonic: r.get(8)?,
                mpi: match (r.get::<_, Option<String>>(9)?, r.get::<_, Option<i64>>(10)?) {
                    (Some(job), Some(rank)) => Some((job, rank)),
                    _ => None,
                },
                clock_sync: parse_clock_sync(r.get::<_, Option<String>>(11)?.as_deref()),
            })
        },
    )?;
    Ok(rows.collect::<std::result::Result<_, _>>()?)
}

/// Loads every module of every process (a small table).
pub fn modules(p: &Profile) -> Result<Vec<ModuleRow>> {
    let rows = p.query_stream(
        "SELECT guid, path, build_id, load_address, size FROM strobe_module ORDER BY guid, id",
        |r| {
            Ok(ModuleRow {
                guid: r.get(0)?,
                path: Arc::from(r.get::<_, Option<String>>(1)?.unwrap_or_default().as_str()),
                build_id: r.get(2)?,
                load_address: r.get::<_, Option<i64>>(3)?.unwrap_or(0) as u64,
                size: r.get::<_, Option<i64>>(4)?.unwrap_or(0) as u64,
            })
        },
    )?;
    Ok(rows.collect::<std::result::Result<_, _>>()?)
}

/// One region row as the per-process query returns it (row ids unresolved).
struct RawRegion {
    tid: i64,
    start: i64,
    end: i64,
    name_id: i64,
    category_id: Option<i64>,
    corr_id: Option<i64>,
    args: Option<String>,
}

fn raw_region(r: &strobe_db::rusqlite::Row<'_>) -> strobe_db::rusqlite::Result<RawRegion> {
    Ok(RawRegion {
        tid: r.get::<_, Option<i64>>(0)?.unwrap_or(0),
        start: r.get(1)?,
        end: r.get(2)?,
        name_id: r.get::<_, Option<i64>>(3)?.unwrap_or(0),
        category_id: r.get(4)?,
        corr_id: r.get(5)?,
        args: r.get(6)?,
    })
}

/// Most cached strings per process before the cache is cleared.
const STRING_CACHE: usize = 65_536;
/// Rows per batch handed from a reader thread to the exporter.
const BATCH: usize = 4096;
/// Batches in flight per reader thread (bounds the memory they hold).
const BATCHES_IN_FLIGHT: usize = 4;
/// Most processes read by their own threads; beyond, streams share the
/// profile's connection (each reader thread holds a SQLite page cache).
const MAX_READER_THREADS: usize = 8;

type BatchRx = std::sync::mpsc::Receiver<std::result::Result<Vec<RawRegion>, strobe_db::DbError>>;
type BatchTx = std::sync::mpsc::SyncSender<std::result::Result<Vec<RawRegion>, strobe_db::DbError>>;

/// Where one process's ordered region rows come from.
enum Feed<'p> {
    /// A statement on the profile's connection.
    Local(std::iter::Peekable<RowStream<'p, RawRegion>>),
    /// A reader thread with its own connection, sending batches.
    /// Each covers a disjoint, later range of start times than the one
    /// before it, so reading them one after the other keeps the order.
    Thread {
        rxs: std::collections::VecDeque<BatchRx>,
        batch: std::collections::VecDeque<RawRegion>,
        error: Option<strobe_db::DbError>,
    },
}

impl Feed<'_> {
    /// The next row's (start, end), `None` at the end; errors stay queued
    /// for [`Feed::take`].
    fn peek(&mut self) -> Option<(i64, i64)> {
        match self {
            Feed::Local(rows) => match rows.peek() {
                Some(Ok(r)) => Some((r.start, r.end)),
                Some(Err(_)) => Some((i64::MIN, 0)),
                None => None,
            },
            Feed::Thread { rxs, batch, error } => {
                if error.is_some() {
                    return Some((i64::MIN, 0));
                }
                while batch.is_empty() {
                    let rx = rxs.front()?;
                    match rx.recv() {
                        Ok(Ok(b)) => batch.extend(b),
                        Ok(Err(e)) => {
                            *error = Some(e);
                            return Some((i64::MIN, 0));
                        }
                        Err(_) => {
                            rxs.pop_front();
                        }
                    }
                }
                batch.front().map(|r| (r.start, r.end))
            }
        }
    }

    fn take(&mut self) -> Option<std::result::Result<RawRegion, strobe_db::DbError>> {
        match self {
            Feed::Local(rows) => rows.next(),
            Feed::Thread { batch, error, .. } => match error.take() {
                Some(e) => Some(Err(e)),
                None => batch.pop_front().map(Ok),
            },
        }
    }
}

struct SetStream<'p> {
    /// The table set (see [`Profile::table_sets`]).
    set: usize,
    guid: Arc<str>,
    feed: Feed<'p>,
    string_sql: String,
    strings: crate::fasthash::FastMap<i64, Arc<str>>,
    threads: crate::fasthash::FastMap<i64, (i64, i64)>,
}

/// Time-ordered regions of every process: one ordered query per process
/// (over its suffixed tables, window applied, narrow rows so SQLite's
/// external sort stays cheap), each run by its own reader thread on its
/// own read-only connection when there are few processes (so sorting and
/// encoding use two cores), merged here; names, categories and OS pid/tid
/// are resolved from small per-process caches.
pub struct Regions<'p> {
    p: &'p Profile,
    sets: Vec<SetStream<'p>>,
    /// Table sets not started yet (a profile read in place).
    pending: std::collections::VecDeque<usize>,
    table_sets: Vec<(strobe_db::schema::TableSet, String)>,
}

/// When the process has region arguments, copies them into an indexed
/// TEMP table of `conn` (the writer creates no index on `rocpd_arg`) and
/// returns its name. SQLite keeps TEMP objects in temporary files by
/// default; never change `temp_store` here: that drops the reader's TEMP
/// views.
fn prepare_args(
    conn: &strobe_db::rusqlite::Connection,
    sc: &str,
    sf: &str,
) -> Result<Option<String>> {
    let asql = format!("SELECT EXISTS (SELECT 1 FROM \"{sc}\".\"rocpd_arg{sf}\")");
    let has_args: bool = conn
        .query_row(&asql, [], |r| r.get(0))
        .map_err(qerr(&asql))?;
    if !has_args {
        return Ok(None);
    }
    let t = format!("strobe_export_args{sf}");
    let sql = format!(
        "DROP TABLE IF EXISTS temp.\"{t}\";
         CREATE TEMP TABLE \"{t}\" AS SELECT event_id, position, name, type, value FROM \"{sc}\".\"rocpd_arg{sf}\";
         CREATE INDEX temp.\"{t}_ev\" ON \"{t}\"(event_id, position);"
    );
    conn.execute_batch(&sql).map_err(qerr(&sql))?;
    Ok(Some(t))
}

/// `WHERE` for the time window and an optional row-id range.
fn where_clause(window: (Option<i64>, Option<i64>), rows: (Option<i64>, Option<i64>)) -> String {
    let mut wh = Vec::new();
    if let Some(lo) = window.0 {
        wh.push(format!("R.\"end\" >= {lo}"));
    }
    if let Some(hi) = window.1 {
        wh.push(format!("R.start <= {hi}"));
    }
    if let Some(a) = rows.0 {
        wh.push(format!("R.rowid >= {a}"));
    }
    if let Some(b) = rows.1 {
        wh.push(format!("R.rowid < {b}"));
    }
    if wh.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", wh.join(" AND "))
    }
}

/// The ordered region query of one process (SQLite sorts), for processes
/// read on the profile's own connection.
fn region_query(
    conn: &strobe_db::rusqlite::Connection,
    sc: &str,
    sf: &str,
    window: (Option<i64>, Option<i64>),
) -> Result<String> {
    let args_col = match prepare_args(conn, sc, sf)? {
        Some(t) => format!(
            "(SELECT json_group_array(json_array(A.name, A.type, A.value)) FROM (SELECT name, type, value FROM temp.\"{t}\" X WHERE X.event_id = R.event_id ORDER BY position) A)"
        ),
        None => "NULL".to_string(),
    };
    Ok(format!(
        "SELECT R.tid, R.start, R.\"end\", R.name_id, E.category_id, E.correlation_id, {args_col}
         FROM \"{sc}\".\"rocpd_region{sf}\" R LEFT JOIN \"{sc}\".\"rocpd_event{sf}\" E ON E.id = R.event_id
         {} ORDER BY R.start, R.\"end\" DESC",
        where_clause(window, (None, None))
    ))
}

/// Runs one process's region scan on a new connection, sorts it with
/// bounded memory ([`crate::runsort`]) and sends the ordered rows in
/// batches, each with its arguments.
fn reader_thread(
    file: String,
    sc: String,
    sf: String,
    window: (Option<i64>, Option<i64>),
    rows: (Option<i64>, Option<i64>),
    tx: BatchTx,
) {
    let run = || -> std::result::Result<(), strobe_db::DbError> {
        let conn = open_attached(&file, &sc)?;
        let args_table = prepare_args(&conn, &sc, &sf).map_err(|e| match e {
            crate::error::ExportError::Db(d) => d,
            other => strobe_db::DbError::Query {
                message: other.to_string(),
                sql: String::new(),
            },
        })?;
        let sql = format!(
            "SELECT R.tid, R.start, R.\"end\", R.name_id, E.category_id, E.correlation_id, R.event_id
             FROM \"{sc}\".\"rocpd_region{sf}\" R LEFT JOIN \"{sc}\".\"rocpd_event{sf}\" E ON E.id = R.event_id {}",
            where_clause(window, rows)
        );
        let io = |e: std::io::Error| strobe_db::DbError::Io {
            path: std::env::temp_dir(),
            error: e,
        };
        let mut sorter = crate::runsort::RunSorter::new();
        {
            let mut st = conn.prepare(&sql).map_err(qerr(&sql))?;
            let mut rows = st.query([]).map_err(qerr(&sql))?;
            while let Some(r) = rows.next().map_err(qerr(&sql))? {
                let rec = (|| -> strobe_db::rusqlite::Result<crate::runsort::Rec> {
                    Ok(crate::runsort::Rec {
                        tid: r.get::<_, Option<i64>>(0)?.unwrap_or(0),
                        start: r.get(1)?,
                        end: r.get(2)?,
                        name_id: r.get::<_, Option<i64>>(3)?.unwrap_or(0),
                        category_id: r.get::<_, Option<i64>>(4)?.unwrap_or(-1),
                        corr_id: r.get::<_, Option<i64>>(5)?.unwrap_or(i64::MIN),
                        event_id: r.get::<_, Option<i64>>(6)?.unwrap_or(0),
                    })
                })()
                .map_err(qerr(&sql))?;
                sorter.push(rec).map_err(io)?;
            }
        }
        let args_sql = args_table.map(|t| {
            format!(
                "SELECT json_group_array(json_array(name, type, value)) FROM (SELECT name, type, value FROM temp.\"{t}\" WHERE event_id = ?1 ORDER BY position)"
            )
        });
        let mut batch = Vec::with_capacity(BATCH);
        for rec in sorter.finish().map_err(io)? {
            let rec = rec.map_err(io)?;
            let args = match &args_sql {
                Some(q) => conn
                    .prepare_cached(q)
                    .and_then(|mut st| {
                        st.query_row([rec.event_id], |r| r.get::<_, Option<String>>(0))
                    })
                    .map_err(qerr(q))?
                    .filter(|j| j != "[]"),
                None => None,
            };
            batch.push(RawRegion {
                tid: rec.tid,
                start: rec.start,
                end: rec.end,
                name_id: rec.name_id,
                category_id: (rec.category_id >= 0).then_some(rec.category_id),
                corr_id: (rec.corr_id != i64::MIN).then_some(rec.corr_id),
                args,
            });
            if batch.len() == BATCH {
                let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                if tx.send(Ok(full)).is_err() {
                    return Ok(()); // the exporter stopped reading
                }
            }
        }
        if !batch.is_empty() {
            let _ = tx.send(Ok(batch));
        }
        Ok(())
    };
    if let Err(e) = run() {
        let _ = tx.send(Err(e));
    }
}

/// Streams regions and markers of all processes ordered by start, longest
/// first at equal starts (so parents precede their children), with their
/// correlation ids and arguments.
pub fn regions(p: &Profile) -> Result<Regions<'_>> {
    let table_sets = p.table_sets();
    let n_sets = table_sets.len();
    // A profile read in place is streamed a few processes at a time, each
    // in time order (see `ACTIVE_SETS`).
    let federated = p.is_federated();
    let threaded = federated || n_sets <= MAX_READER_THREADS;
    let mut r = Regions {
        p,
        sets: Vec::new(),
        pending: std::collections::VecDeque::new(),
        table_sets,
    };
    for k in 0..n_sets {
        if federated && k >= ACTIVE_SETS {
            r.pending.push_back(k);
        } else {
            r.open_set(k, threaded)?;
        }
    }
    Ok(r)
}

/// Processes of a profile read in place whose regions stream at once: the
/// next one's reader runs while the current one is written.
const ACTIVE_SETS: usize = 2;

impl<'p> Regions<'p> {
    /// Starts the stream(s) of table set `k`: a reader thread (two for the
    /// only process of a profile when it is large), or an ordered query on
    /// the profile's connection.
    fn open_set(&mut self, k: usize, threaded: bool) -> Result<()> {
        let p = self.p;
        let window = p.window();
        let n_sets = self.table_sets.len();
        let (ts, guid) = &self.table_sets[k];
        let (sc, sf) = (&ts.schema, &ts.suffix);
        let tsql = format!(
            "SELECT T.id, P.pid, T.tid FROM \"{sc}\".\"rocpd_info_thread{sf}\" T JOIN \"{sc}\".\"rocpd_info_process{sf}\" P ON P.id = T.pid"
        );
        let mut threads = crate::fasthash::FastMap::default();
        p.with_set_connection(k, |conn| {
            let mut st = conn.prepare(&tsql).map_err(qerr(&tsql))?;
            let rows = st
                .query_map([], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, Option<i64>>(1)?,
                        r.get::<_, Option<i64>>(2)?,
                    ))
                })
                .map_err(qerr(&tsql))?;
            for r in rows {
                let (id, pid, tid) = r.map_err(qerr(&tsql))?;
                threads.insert(id, (pid.unwrap_or(0), tid.unwrap_or(0)));
            }
            Ok(())
        })?;
        let string_sql = format!("SELECT string FROM \"{sc}\".\"rocpd_string{sf}\" WHERE id = ?1");
        let guid: Arc<str> = Arc::from(guid.as_str());
        if threaded {
            let file = p.set_file(k).to_string_lossy().into_owned();
            // A single process is split into two row-id ranges, read and
            // sorted by two threads at once and merged like two processes.
            let split = if n_sets == 1 && !p.is_federated() {
                split_point(p.connection(), sc, &format!("rocpd_region{sf}"))?
            } else {
                None
            };
            let ranges = match split {
                Some(mid) => vec![(None, Some(mid)), (Some(mid), None)],
                None => vec![(None, None)],
            };
            for rows in ranges {
                let (tx, rx) = std::sync::mpsc::sync_channel(BATCHES_IN_FLIGHT);
                let (file, sc2, sf2) = (file.clone(), sc.clone(), sf.clone());
                std::thread::Builder::new()
                    .name("strobe-export-reader".into())
                    .spawn(move || reader_thread(file, sc2, sf2, window, rows, tx))?;
                self.sets.push(SetStream {
                    set: k,
                    guid: guid.clone(),
                    feed: Feed::Thread {
                        rxs: std::collections::VecDeque::from([rx]),
                        batch: std::collections::VecDeque::new(),
                        error: None,
                    },
                    string_sql: string_sql.clone(),
                    strings: crate::fasthash::FastMap::default(),
                    threads: threads.clone(),
                });
            }
        } else {
            let sql = region_query(p.connection(), sc, sf, window)?;
            self.sets.push(SetStream {
                set: k,
                guid,
                feed: Feed::Local(p.query_stream(&sql, raw_region)?.peekable()),
                string_sql,
                strings: crate::fasthash::FastMap::default(),
                threads,
            });
        }
        Ok(())
    }

    fn string(p: &Profile, set: &mut SetStream<'_>, id: i64) -> Result<Arc<str>> {
        if let Some(s) = set.strings.get(&id) {
            return Ok(s.clone());
        }
        if set.strings.len() >= STRING_CACHE {
            set.strings.clear();
        }
        let sql = &set.string_sql;
        let v: Option<String> = p.with_set_connection(set.set, |conn| {
            conn.prepare_cached(sql)
                .and_then(|mut st| st.query_row([id], |r| r.get(0)))
                .map_err(qerr(sql))
        })?;
        let a: Arc<str> = Arc::from(v.unwrap_or_default().as_str());
        set.strings.insert(id, a.clone());
        Ok(a)
    }
}

impl Iterator for Regions<'_> {
    type Item = Result<RegionRow>;
    fn next(&mut self) -> Option<Result<RegionRow>> {
        let mut best: Option<(usize, i64, i64)> = None;
        loop {
            if self.sets.is_empty() {
                if let Some(next) = self.pending.pop_front() {
                    if let Err(e) = self.open_set(next, true) {
                        return Some(Err(e));
                    }
                }
            }
            let mut k = 0;
            while k < self.sets.len() {
                match self.sets[k].feed.peek() {
                    Some((start, end)) => {
                        if best.is_none_or(|(_, bs, be)| (start, -end) < (bs, -be)) {
                            best = Some((k, start, end));
                        }
                        k += 1;
                    }
                    // A finished process of a profile read in place makes
                    // room for the next one.
                    None if !self.pending.is_empty() => {
                        self.sets.swap_remove(k);
                        best = None;
                        k = 0;
                        if let Some(next) = self.pending.pop_front() {
                            if let Err(e) = self.open_set(next, true) {
                                return Some(Err(e));
                            }
                        }
                    }
                    None => k += 1,
                }
            }
            if best.is_some() || self.pending.is_empty() {
                break;
            }
        }
        let (k, _, _) = best?;
        let set = &mut self.sets[k];
        let raw = match set.feed.take()? {
            Ok(r) => r,
            Err(e) => return Some(Err(e.into())),
        };
        let p = self.p;
        let name = match Regions::string(p, set, raw.name_id) {
            Ok(n) => n,
            Err(e) => return Some(Err(e)),
        };
        let category = match raw
            .category_id
            .map(|c| Regions::string(p, set, c))
            .transpose()
        {
            Ok(c) => c,
            Err(e) => return Some(Err(e)),
        };
        let (pid, tid) = set.threads.get(&raw.tid).copied().unwrap_or((0, raw.tid));
        let args = match raw.args {
            Some(j) => {
                serde_json::from_str::<Vec<(Option<String>, Option<String>, Option<String>)>>(&j)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(n, t, v)| {
                        (
                            n.unwrap_or_default(),
                            t.unwrap_or_default(),
                            v.unwrap_or_default(),
                        )
                    })
                    .collect()
            }
            None => Vec::new(),
        };
        Some(Ok(RegionRow {
            guid: set.guid.clone(),
            pid,
            tid,
            name,
            category,
            start: raw.start,
            end: raw.end,
            corr_id: raw.corr_id,
            args,
        }))
    }
}

/// Streams samples ordered by time without resolving their stacks
/// (`frames` stays empty; resolve a stack with
/// [`Profile::resolve_stack`] when it is first needed).
pub fn samples_unresolved(p: &Profile) -> Result<RowStream<'_, strobe_db::SampleRow>> {
    Ok(p.samples_unresolved()?)
}

/// Whether a sample of this kind (the `kind` column of `strobe_samples`)
/// measured time off CPU. Every other kind (`sample`, `wall_sample`, none
/// in old databases) is on-CPU time.
pub fn is_off_cpu(kind: &str) -> bool {
    kind == strobe_db::SampleKind::OffCpu.category()
}

/// The time (ns) an on-CPU sample stands for: its weight, or `period_ns`
/// when it has none (a database written before weights existed).
pub fn cpu_weight_ns(s: &strobe_db::SampleRow, period_ns: i64) -> u64 {
    if s.weight_ns > 0 {
        s.weight_ns
    } else {
        period_ns.max(0) as u64
    }
}

/// Streams counter samples ordered by time; for a profile read in place
/// (see [`Profile::is_federated`]), one process after the other, each in
/// time order (no sort over every process's values).
pub fn counters(p: &Profile) -> Result<Counters<'_>> {
    if !p.is_federated() {
        return Ok(Counters {
            p,
            current: Some(p.counters()?),
            pending: Default::default(),
        });
    }
    Ok(Counters {
        p,
        current: None,
        pending: p.table_sets().into_iter().map(|(_, guid)| guid).collect(),
    })
}

/// The stream of [`counters`].
pub struct Counters<'p> {
    p: &'p Profile,
    current: Option<RowStream<'p, strobe_db::CounterRow>>,
    /// Guids of the processes not streamed yet.
    pending: std::collections::VecDeque<String>,
}

impl Iterator for Counters<'_> {
    type Item = strobe_db::Result<strobe_db::CounterRow>;
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(row) = self.current.as_mut().and_then(|c| c.next()) {
                return Some(row);
            }
            let guid = self.pending.pop_front()?;
            // A guid is hex digits and dashes (checked when the profile was
            // opened): safe to write into the query.
            let sql = format!(
                "SELECT guid, pid, tid, name, units, timestamp, value FROM strobe_counters \
                 WHERE guid = '{guid}' ORDER BY timestamp, name"
            );
            match self.p.query_stream(&sql, counter_row) {
                Ok(s) => self.current = Some(s),
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

fn counter_row(
    r: &strobe_db::rusqlite::Row<'_>,
) -> strobe_db::rusqlite::Result<strobe_db::CounterRow> {
    Ok(strobe_db::CounterRow {
        guid: r.get(0)?,
        pid: r.get(1)?,
        tid: r.get(2)?,
        name: r.get(3)?,
        units: r.get(4)?,
        timestamp: r.get(5)?,
        value: r.get(6)?,
    })
}

/// `local offset rtt` triples joined by commas.
fn parse_clock_sync(text: Option<&str>) -> Vec<(i64, i64, i64)> {
    text.unwrap_or_default()
        .split(',')
        .filter_map(|t| {
            let mut n = t.split(' ').map(|v| v.parse::<i64>().ok());
            Some((n.next()??, n.next()??, n.next()??))
        })
        .collect()
}

/// What puts one process's timestamps on the common time base: a constant
/// (its node's offset) and, for an MPI rank, the offset to rank 0's clock
/// measured at `MPI_Init` and `MPI_Finalize`, interpolated in between (the
/// clocks drift) and held outside. `t + shift` is the aligned time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Shift {
    base: i64,
    /// (local time, offset) of the comparisons used, in time order.
    sync: [Option<(i64, i64)>; 2],
}

impl Shift {
    /// A constant shift.
    pub fn constant(ns: i64) -> Shift {
        Shift {
            base: ns,
            sync: [None, None],
        }
    }

    /// The shift at the process's time `t`.
    pub fn at(&self, t: i64) -> i64 {
        let offset = match self.sync {
            [None, _] => 0,
            [Some((_, o)), None] => o,
            [Some((t0, o0)), Some((t1, o1))] => {
                if t <= t0 || t1 <= t0 {
                    o0
                } else if t >= t1 {
                    o1
                } else {
                    let d = i128::from(o1 - o0) * i128::from(t - t0) / i128::from(t1 - t0);
                    o0 + d as i64
                }
            }
        };
        self.base + offset
    }

    /// `base` plus the offsets of `points` (local time, offset, round
    /// trip), keeping the comparisons worth using: one whose round trip was much
    /// longer than the other's (the rank was preempted mid-exchange) is
    /// left out rather than bend the line.
    pub fn with_sync(base: i64, points: &[(i64, i64, i64)]) -> Shift {
        let mut points: Vec<_> = points.to_vec();
        points.sort_unstable();
        if let [a, b] = points[..] {
            let (better, worse) = if a.2 <= b.2 { (a, b) } else { (b, a) };
            if worse.2 > 4 * better.2.max(1) && worse.2 > 50_000 {
                points = vec![better];
            }
        }
        let mut sync = [None, None];
        for (slot, p) in sync.iter_mut().zip(points.iter()) {
            *slot = Some((p.0, p.1));
        }
        if points.len() > 2 {
            sync[1] = points.last().map(|p| (p.0, p.1));
        }
        Shift { base, sync }
    }
}

impl std::ops::Add<Shift> for i64 {
    type Output = i64;
    fn add(self, shift: Shift) -> i64 {
        self.saturating_add(shift.at(self))
    }
}

/// Per-process shift that puts every process on one time base: other
/// processes as their node ([`node_shifts`]); MPI ranks that measured
/// their clock against rank 0 (when rank 0 is among `procs`) on rank 0's
/// clock with those measurements (to within half the round trip of the
/// best exchange: microseconds), then shifted as rank 0 is.
pub fn clock_shifts(procs: &[ProcessRow]) -> HashMap<String, Shift> {
    let node = node_shifts(procs);
    let node_of = |p: &ProcessRow| node.get(&p.guid).copied().unwrap_or(0);
    let rank_zero: HashMap<&str, &ProcessRow> = procs
        .iter()
        .filter_map(|p| match &p.mpi {
            Some((job, 0)) => Some((job.as_str(), p)),
            _ => None,
        })
        .collect();
    procs
        .iter()
        .map(|p| {
            let reference = p
                .mpi
                .as_ref()
                .and_then(|(job, _)| rank_zero.get(job.as_str()));
            let shift = match reference {
                Some(r) if !p.clock_sync.is_empty() => Shift::with_sync(node_of(r), &p.clock_sync),
                _ => Shift::constant(node_of(p)),
            };
            (p.guid.clone(), shift)
        })
        .collect()
}

/// Per-process constant shift (ns) from the nodes' clock snapshots.
///
/// Timestamps are `CLOCK_MONOTONIC` of the node that recorded them.
/// Processes of one node share that clock and are never shifted. For a
/// profile spanning several nodes, each node's monotonic clock is mapped to
/// the realtime clock through its processes' start time, which the process
/// uuid records in Unix milliseconds (UUIDv7 time field) next to the
/// monotonic `start` column; nodes are then shifted onto the first node's
/// monotonic time base. The alignment is as good as the uuid's millisecond
/// resolution and the nodes' NTP synchronisation.
fn node_shifts(procs: &[ProcessRow]) -> HashMap<String, i64> {
    let mut out = HashMap::new();
    let machines: std::collections::HashSet<&str> =
        procs.iter().map(|p| p.machine_id.as_str()).collect();
    if machines.len() <= 1 {
        for p in procs {
            out.insert(p.guid.clone(), 0);
        }
        return out;
    }
    // realtime - monotonic, per node: from a recorded clock snapshot when
    // one exists (nanoseconds), else from the process start and the uuid's
    // millisecond time field.
    let mut node_offset: HashMap<&str, i64> = HashMap::new();
    for p in procs {
        if let Some(offset) = p.realtime_minus_monotonic {
            node_offset.insert(p.machine_id.as_str(), offset);
        }
    }
    for p in procs {
        if let (Some(start), Some(ms)) = (p.start, uuid_unix_ms(&p.guid)) {
            node_offset
                .entry(p.machine_id.as_str())
                .or_insert(ms as i64 * 1_000_000 - start);
        }
    }
    let reference = procs
        .first()
        .and_then(|p| node_offset.get(p.machine_id.as_str()).copied());
    for p in procs {
        let shift = match (reference, node_offset.get(p.machine_id.as_str())) {
            (Some(r), Some(o)) => o - r,
            _ => 0,
        };
        out.insert(p.guid.clone(), shift);
    }
    out
}

/// The Unix-millisecond time field of a UUIDv7 guid (first 48 bits).
fn uuid_unix_ms(guid: &str) -> Option<u64> {
    let hex: String = guid.chars().filter(|c| *c != '-').take(12).collect();
    if hex.len() != 12 {
        return None;
    }
    u64::from_str_radix(&hex, 16).ok()
}

/// The name shown for a frame: its function, or `module+0xoffset` before
/// symbolization (the same rule as `strobe summary`).
pub fn frame_name(f: &strobe_db::ResolvedFrame) -> String {
    f.display_name()
}

#[cfg(test)]
mod clock_tests {
    use super::*;

    fn proc_on(machine: &str, guid: &str, offset: Option<i64>) -> ProcessRow {
        ProcessRow {
            guid: guid.into(),
            pid: 1,
            ppid: 0,
            command: String::new(),
            machine_id: machine.into(),
            hostname: machine.into(),
            start: Some(1_000),
            realtime_minus_monotonic: offset,
            ..Default::default()
        }
    }

    #[test]
    fn recorded_clock_snapshots_align_nodes_to_the_nanosecond() {
        // Node b's monotonic clock started 5.000000123 s before node a's.
        let procs = [
            proc_on(
                "a",
                "0190a000-0000-7000-8000-000000000001",
                Some(1_700_000_000_000_000_000),
            ),
            proc_on(
                "b",
                "0190a000-0000-7000-8000-000000000002",
                Some(1_700_000_005_000_000_123),
            ),
        ];
        let shifts = clock_shifts(&procs);
        assert_eq!(shifts[&procs[0].guid].at(0), 0);
        assert_eq!(shifts[&procs[1].guid].at(0), 5_000_000_123);
    }

    #[test]
    fn without_snapshots_the_uuid_milliseconds_are_used() {
        let mut a = proc_on("a", "00000000-03e8-7000-8000-000000000001", None); // 1000 ms
        let mut b = proc_on("b", "00000000-07d0-7000-8000-000000000002", None); // 2000 ms
        a.start = Some(0);
        b.start = Some(0);
        let shifts = clock_shifts(&[a.clone(), b.clone()]);
        assert_eq!(shifts[&b.guid].at(0) - shifts[&a.guid].at(0), 1_000_000_000);
    }

    #[test]
    fn mpi_ranks_follow_their_measured_offset_and_its_drift() {
        let mut zero = proc_on("a", "00000000-03e8-7000-8000-000000000001", Some(0));
        zero.mpi = Some(("j".into(), 0));
        let mut one = proc_on("b", "00000000-03e8-7000-8000-000000000002", Some(7_000));
        one.mpi = Some(("j".into(), 1));
        // Rank 1's clock reads 1000 ns behind rank 0 at 100, 3000 ns at 1100.
        one.clock_sync = vec![(100, 1_000, 500), (1_100, 3_000, 400)];
        let shifts = clock_shifts(&[zero.clone(), one.clone()]);
        assert_eq!(shifts[&zero.guid].at(5), 0);
        let s = shifts[&one.guid];
        assert_eq!((s.at(0), s.at(600), s.at(5_000)), (1_000, 2_000, 3_000));
        assert_eq!(600 + s, 2_600);
        // A comparison made while the rank was preempted is left out.
        one.clock_sync = vec![(100, 1_000, 500), (1_100, 90_000, 200_000)];
        let s = clock_shifts(&[zero.clone(), one.clone()])[&one.guid];
        assert_eq!(s.at(1_100), 1_000);
        // Without its rank 0 a rank keeps its node's shift.
        let alone = clock_shifts(std::slice::from_ref(&one));
        assert_eq!(alone[&one.guid].at(0), 0);
    }
}
