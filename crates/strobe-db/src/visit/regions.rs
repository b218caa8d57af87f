//! The region stream of a visit.
//!
//! Owns [`Regions`]: regions and markers of every process in time order
//! (start, longest first at equal starts), with their names, categories,
//! correlation ids and arguments. Each process is read by a thread of its
//! own on a read-only connection and sorted with bounded memory
//! ([`super::runsort`]), or, for many processes, ordered by SQLite on the
//! profile's connection; the streams are merged here. It never writes to
//! an input and never formats output.

use std::sync::Arc;

use crate::reader::Profile;
use crate::scan::{open_attached, qerr, split_point};
use crate::stream::RowStream;
use crate::Result;

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

fn raw_region(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawRegion> {
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

type BatchRx = std::sync::mpsc::Receiver<std::result::Result<Vec<RawRegion>, crate::DbError>>;
type BatchTx = std::sync::mpsc::SyncSender<std::result::Result<Vec<RawRegion>, crate::DbError>>;

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
        error: Option<crate::DbError>,
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

    fn take(&mut self) -> Option<std::result::Result<RawRegion, crate::DbError>> {
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
    strings: crate::scan::IdMap<i64, Arc<str>>,
    threads: crate::scan::IdMap<i64, (i64, i64)>,
}

/// Time-ordered regions of every process: one ordered query per process
/// (over its suffixed tables, window applied, narrow rows so SQLite's
/// external sort stays cheap), each run by its own reader thread on its
/// own read-only connection when there are few processes (so sorting and
/// encoding use two cores), merged here; names, categories and OS pid/tid
/// are resolved from small per-process caches.
pub(super) struct Regions<'p> {
    p: &'p Profile,
    sets: Vec<SetStream<'p>>,
    /// Table sets not started yet (a profile read in place).
    pending: std::collections::VecDeque<usize>,
    table_sets: Vec<(crate::schema::TableSet, String)>,
}

/// When the process has region arguments, copies them into an indexed
/// TEMP table of `conn` (the writer creates no index on `rocpd_arg`) and
/// returns its name. SQLite keeps TEMP objects in temporary files by
/// default; never change `temp_store` here: that drops the reader's TEMP
/// views.
fn prepare_args(conn: &rusqlite::Connection, sc: &str, sf: &str) -> Result<Option<String>> {
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
    conn: &rusqlite::Connection,
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
    let run = || -> std::result::Result<(), crate::DbError> {
        let conn = open_attached(&file, &sc)?;
        let args_table = prepare_args(&conn, &sc, &sf)?;
        let sql = format!(
            "SELECT R.tid, R.start, R.\"end\", R.name_id, E.category_id, E.correlation_id, R.event_id
             FROM \"{sc}\".\"rocpd_region{sf}\" R LEFT JOIN \"{sc}\".\"rocpd_event{sf}\" E ON E.id = R.event_id {}",
            where_clause(window, rows)
        );
        let io = |e: std::io::Error| crate::DbError::Io {
            path: std::env::temp_dir(),
            error: e,
        };
        let mut sorter = super::runsort::RunSorter::new();
        {
            let mut st = conn.prepare(&sql).map_err(qerr(&sql))?;
            let mut rows = st.query([]).map_err(qerr(&sql))?;
            while let Some(r) = rows.next().map_err(qerr(&sql))? {
                let rec = (|| -> rusqlite::Result<super::runsort::Rec> {
                    Ok(super::runsort::Rec {
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
pub(super) fn regions(p: &Profile) -> Result<Regions<'_>> {
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
        let mut threads = crate::scan::IdMap::default();
        p.set_connection(k, |conn| {
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
                split_point(p.conn(), sc, &format!("rocpd_region{sf}"))?
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
                super::spawn_reader("strobe-regions", move || {
                    reader_thread(file, sc2, sf2, window, rows, tx)
                })?;
                self.sets.push(SetStream {
                    set: k,
                    guid: guid.clone(),
                    feed: Feed::Thread {
                        rxs: std::collections::VecDeque::from([rx]),
                        batch: std::collections::VecDeque::new(),
                        error: None,
                    },
                    string_sql: string_sql.clone(),
                    strings: crate::scan::IdMap::default(),
                    threads: threads.clone(),
                });
            }
        } else {
            let sql = region_query(p.conn(), sc, sf, window)?;
            self.sets.push(SetStream {
                set: k,
                guid,
                feed: Feed::Local(p.stream_query(&sql, raw_region)?.peekable()),
                string_sql,
                strings: crate::scan::IdMap::default(),
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
        let v: Option<String> = p.set_connection(set.set, |conn| {
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
            Err(e) => return Some(Err(e)),
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
