//! One process's tables read in storage order, on a connection of its
//! own: what a columnar export copies process by process (the Parquet
//! dataset of strobe-export).
//!
//! Owns [`ProcessSource`] (where one process's tables are: a handle a
//! reader thread opens), [`ProcessTables`] (its connection, window
//! applied) and what is read there as plain rows: threads, regions with
//! their arguments ([`ProcessTables::regions`]: both tables in storage
//! order merged by event id, or sorted by SQLite when a file's rows are
//! not in event order), strings by id, frames, the frames of every stack
//! ([`StackWalk`]), samples by row-id range through the one sample reader
//! of [`crate::scan`] ([`SampleScan`]), counter values by row-id range
//! ([`CounterScan`]) and the row-id bounds of the large tables
//! ([`Profile::row_id_bounds`]). Rows come in storage order, each handed
//! to a callback that may stop the read. It never orders rows across
//! processes, never writes and never formats output.

use std::path::{Path, PathBuf};

use rusqlite::types::ValueRef;
use rusqlite::Connection;

use crate::reader::Profile;
use crate::scan::{open_attached, qerr, scan_sql, IdMap, Mapper, ScannedSample, Window};
use crate::schema::TableSet;
use crate::{DbError, Result, SampleKind};

/// Where one process's tables are (its file and table names), for a
/// reader that opens them on a connection of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessSource {
    /// The process guid.
    pub guid: String,
    /// Its table set's index (see [`Profile::table_sets`]).
    pub set: usize,
    file: PathBuf,
    tables: TableSet,
}

impl ProcessSource {
    /// The file holding the process's tables.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Opens the process's tables on a read-only connection of their own;
    /// `window` (ns, either side open) limits regions, samples and counter
    /// values as the profile's views do.
    pub fn open(&self, window: Window) -> Result<ProcessTables> {
        Ok(ProcessTables {
            conn: open_attached(&self.file, &self.tables.schema)?,
            src: self.clone(),
            window,
        })
    }
}

/// The first and last row id of a large table (`(0, -1)` when empty).
pub type RowIds = (i64, i64);

/// The row-id bounds of a process's large tables: the ranges a reader
/// splits into chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowIdBounds {
    /// `rocpd_sample`.
    pub samples: RowIds,
    /// `rocpd_region`.
    pub regions: RowIds,
    /// `strobe_counter_sample`.
    pub counters: RowIds,
}

impl Profile {
    /// Every process's tables, in table-set order (see
    /// [`Profile::table_sets`]).
    pub fn process_sources(&self) -> Vec<ProcessSource> {
        self.table_sets()
            .into_iter()
            .enumerate()
            .map(|(k, (tables, guid))| ProcessSource {
                guid,
                set: k,
                file: self.set_file(k).to_path_buf(),
                tables,
            })
            .collect()
    }

    /// The row-id bounds of `src`'s large tables, read on the profile's
    /// connection (the window ignored).
    pub fn row_id_bounds(&self, src: &ProcessSource) -> Result<RowIdBounds> {
        let (sc, sf) = (&src.tables.schema, &src.tables.suffix);
        self.set_connection(src.set, |conn| {
            // Two queries: SQLite finds MIN and MAX of the row id in the
            // b-tree only alone.
            let rows = |table: &str| -> Result<RowIds> {
                let bound = |f: &str| -> Result<Option<i64>> {
                    let sql = format!("SELECT {f}(rowid) FROM \"{sc}\".\"{table}{sf}\"");
                    conn.query_row(&sql, [], |r| r.get(0)).map_err(qerr(&sql))
                };
                Ok((bound("MIN")?.unwrap_or(0), bound("MAX")?.unwrap_or(-1)))
            };
            Ok(RowIdBounds {
                samples: rows("rocpd_sample")?,
                regions: rows("rocpd_region")?,
                counters: rows("strobe_counter_sample")?,
            })
        })
    }
}

/// A thread of the process (`rocpd_info_thread`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadRow {
    /// OS tid (0 when not stored).
    pub tid: i64,
    /// Name, if any.
    pub name: Option<String>,
    /// Start (ns).
    pub start: Option<i64>,
    /// End (ns).
    pub end: Option<i64>,
}

/// A region argument (`rocpd_arg`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegionArg {
    /// Position among its event's arguments.
    pub position: i64,
    /// Name.
    pub name: String,
    /// Type name as stored (`int`, `string`, …).
    pub ty: String,
    /// Value as stored text.
    pub value: String,
}

/// A region of the process with its ids as stored (names and categories
/// are string ids, see [`ProcessTables::string`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessRegion<'a> {
    /// OS tid.
    pub tid: i64,
    /// Start (ns).
    pub start: i64,
    /// End (ns).
    pub end: i64,
    /// String id of the name.
    pub name_id: i64,
    /// String id of the category, if any.
    pub category_id: Option<i64>,
    /// Correlation id, if any.
    pub correlation_id: Option<i64>,
    /// Call site id of the stack, if any.
    pub stack_id: Option<i64>,
    /// Its arguments, by position.
    pub args: &'a [RegionArg],
}

/// How regions meet their arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgJoin {
    /// Both tables in storage order, merged by event id: regions and their
    /// arguments are written together, so both are in event order (no
    /// sort, no index).
    Storage,
    /// Both sorted by event id by SQLite: for files whose rows are not in
    /// event order.
    Sorted,
}

/// How a read of regions ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegionsRead {
    /// Every region was handed over.
    Complete,
    /// The callback stopped it.
    Stopped,
    /// [`ArgJoin::Storage`] found rows out of event order: what was handed
    /// over is to be discarded and the regions read again with
    /// [`ArgJoin::Sorted`].
    NotInEventOrder,
}

/// A frame as stored: module path, pc relative to the module, names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameRow {
    /// Frame row id.
    pub id: i64,
    /// Module path, if the pc fell in a module.
    pub module: Option<String>,
    /// Pc relative to the module (0 when not stored).
    pub rel_pc: i64,
    /// Function name, once symbolized.
    pub function: Option<String>,
    /// Source file, once symbolized.
    pub file: Option<String>,
    /// Source line, once symbolized.
    pub line: Option<i64>,
}

impl FrameRow {
    /// The function name, or `module+0xoffset` before symbolization (as
    /// [`crate::ResolvedFrame::display_name`]).
    pub fn display_name(&self) -> String {
        crate::reader::display_name(
            self.function.as_deref(),
            self.module.as_deref(),
            self.rel_pc as u64,
        )
    }
}

/// A counter of the process (`rocpd_info_pmc`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterName {
    /// Counter row id.
    pub id: i64,
    /// Name.
    pub name: String,
    /// Unit, if any.
    pub unit: Option<String>,
}

/// One counter value (`strobe_counter_sample`) of a known counter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CounterValue {
    /// The counter's row id (see [`CounterScan::counters`]).
    pub counter: i64,
    /// OS tid of a per-thread counter.
    pub tid: Option<i64>,
    /// When (ns).
    pub timestamp: i64,
    /// The value, if stored.
    pub value: Option<f64>,
}

/// Text of a column, lossy for bytes that are not UTF-8.
fn text_ref(v: ValueRef<'_>) -> Option<String> {
    match v {
        ValueRef::Text(t) | ValueRef::Blob(t) => Some(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Integer(i) => Some(i.to_string()),
        ValueRef::Real(f) => Some(f.to_string()),
        ValueRef::Null => None,
    }
}

/// The time window as SQL conditions on `lo_col`/`hi_col` (`lo_col >=
/// window start`, `hi_col <= window end`).
fn window_sql(window: Window, lo_col: &str, hi_col: &str) -> Vec<String> {
    let mut w = Vec::new();
    if let Some(lo) = window.0 {
        w.push(format!("{lo_col} >= {lo}"));
    }
    if let Some(hi) = window.1 {
        w.push(format!("{hi_col} <= {hi}"));
    }
    w
}

fn where_of(conds: &[String]) -> String {
    if conds.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", conds.join(" AND "))
    }
}

/// Runs `sql` on `conn` and hands each row to `f` until it returns false;
/// returns whether every row was handed over.
fn each_row<E: From<DbError>>(
    conn: &Connection,
    sql: &str,
    mut f: impl FnMut(&rusqlite::Row<'_>) -> std::result::Result<bool, E>,
) -> std::result::Result<bool, E> {
    let mut st = conn.prepare(sql).map_err(qerr(sql))?;
    let mut rows = st.query([]).map_err(qerr(sql))?;
    while let Some(r) = rows.next().map_err(qerr(sql))? {
        if !f(r)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// A process's tables on a connection of their own (see
/// [`ProcessSource::open`]).
pub struct ProcessTables {
    conn: Connection,
    src: ProcessSource,
    window: Window,
}

/// A region argument as the merge meets it: its event id, then the
/// argument.
type ArgRow = (i64, RegionArg);

impl ProcessTables {
    /// `"<schema>"."<table><suffix>"`.
    fn table(&self, name: &str) -> String {
        format!(
            "\"{}\".\"{name}{}\"",
            self.src.tables.schema, self.src.tables.suffix
        )
    }

    /// The process read.
    pub fn source(&self) -> &ProcessSource {
        &self.src
    }

    /// Hands each thread, in storage order, to `f` until it returns
    /// false; returns whether every thread was handed over.
    pub fn threads<E: From<DbError>>(
        &self,
        mut f: impl FnMut(&ThreadRow) -> std::result::Result<bool, E>,
    ) -> std::result::Result<bool, E> {
        let sql = format!(
            "SELECT tid, name, start, \"end\" FROM {} ORDER BY rowid",
            self.table("rocpd_info_thread")
        );
        each_row(&self.conn, &sql, |r| {
            let q = qerr(&sql);
            let get = |k| -> Result<Option<i64>> { r.get(k).map_err(&q) };
            let row = ThreadRow {
                tid: get(0)?.unwrap_or(0),
                name: text_ref(r.get_ref(1).map_err(&q)?),
                start: get(2)?,
                end: get(3)?,
            };
            f(&row)
        })
    }

    /// The string of id `id` (`rocpd_string`; empty when missing or NULL).
    pub fn string(&self, id: i64) -> Result<String> {
        let sql = format!(
            "SELECT string FROM {} WHERE id = ?1",
            self.table("rocpd_string")
        );
        let v: Option<String> = self
            .conn
            .prepare_cached(&sql)
            .and_then(|mut st| {
                st.query_row([id], |r| r.get(0)).or_else(|e| match e {
                    rusqlite::Error::QueryReturnedNoRows => Ok(None),
                    e => Err(e),
                })
            })
            .map_err(qerr(&sql))?;
        Ok(v.unwrap_or_default())
    }

    /// OS tid of each thread row id.
    fn thread_ids(&self) -> Result<IdMap<i64, i64>> {
        let sql = format!("SELECT id, tid FROM {}", self.table("rocpd_info_thread"));
        let mut out = IdMap::default();
        each_row(&self.conn, &sql, |r| -> Result<bool> {
            let id: i64 = r.get(0).map_err(qerr(&sql))?;
            let tid: Option<i64> = r.get(1).map_err(qerr(&sql))?;
            out.insert(id, tid.unwrap_or(0));
            Ok(true)
        })?;
        Ok(out)
    }

    /// Hands each region in the window (those overlapping it, as the
    /// views keep them), in storage order (`join` Storage) or event order
    /// (Sorted), with its arguments, to `f` until it returns false.
    pub fn regions<E: From<DbError>>(
        &self,
        join: ArgJoin,
        mut f: impl FnMut(&ProcessRegion<'_>) -> std::result::Result<bool, E>,
    ) -> std::result::Result<RegionsRead, E> {
        let threads = self.thread_ids()?;
        let (order, args_order) = match join {
            ArgJoin::Storage => ("R.rowid", "rowid"),
            ArgJoin::Sorted => ("R.event_id", "event_id, position"),
        };
        let sql = format!(
            "SELECT R.tid, R.start, R.\"end\", R.name_id, E.category_id, E.correlation_id, E.stack_id, R.event_id
             FROM {} R JOIN {} E ON E.id = R.event_id
             {} ORDER BY {order}",
            self.table("rocpd_region"),
            self.table("rocpd_event"),
            where_of(&window_sql(self.window, "R.\"end\"", "R.start"))
        );
        let asql = format!(
            "SELECT event_id, position, name, type, value FROM {} ORDER BY {args_order}",
            self.table("rocpd_arg")
        );
        let mut ast = self.conn.prepare(&asql).map_err(qerr(&asql))?;
        let mut arows = ast.query([]).map_err(qerr(&asql))?;
        let mut next_arg = || -> Result<Option<ArgRow>> {
            let Some(r) = arows.next().map_err(qerr(&asql))? else {
                return Ok(None);
            };
            let q = qerr(&asql);
            let s = |k| -> Result<String> {
                Ok(text_ref(r.get_ref(k).map_err(&q)?).unwrap_or_default())
            };
            let event = r.get::<_, Option<i64>>(0).map_err(&q)?.unwrap_or(-1);
            let arg = RegionArg {
                position: r.get::<_, Option<i64>>(1).map_err(&q)?.unwrap_or(0),
                name: s(2)?,
                ty: s(3)?,
                value: s(4)?,
            };
            Ok(Some((event, arg)))
        };
        let mut pending = next_arg()?;
        let mut last_arg_event = i64::MIN;
        let mut last_event = i64::MIN;
        let mut args: Vec<RegionArg> = Vec::new();
        let mut st = self.conn.prepare(&sql).map_err(qerr(&sql))?;
        let mut rows = st.query([]).map_err(qerr(&sql))?;
        while let Some(r) = rows.next().map_err(qerr(&sql))? {
            let q = qerr(&sql);
            let int = |k| -> Result<Option<i64>> { r.get(k).map_err(&q) };
            let tid_row = int(0)?.unwrap_or(0);
            let (start, end) = (int(1)?.unwrap_or(0), int(2)?.unwrap_or(0));
            let name_id = int(3)?.unwrap_or(0);
            let (category_id, correlation_id, stack_id) = (int(4)?, int(5)?, int(6)?);
            let event = int(7)?.unwrap_or(-1);
            if join == ArgJoin::Storage && event <= last_event {
                return Ok(RegionsRead::NotInEventOrder);
            }
            last_event = event;
            args.clear();
            while let Some((arg_event, _)) = &pending {
                if *arg_event > event {
                    break;
                }
                if *arg_event < last_arg_event && join == ArgJoin::Storage {
                    return Ok(RegionsRead::NotInEventOrder);
                }
                last_arg_event = *arg_event;
                let (arg_event, a) = pending.take().unwrap_or_default();
                if arg_event == event {
                    args.push(a);
                }
                pending = next_arg()?;
            }
            args.sort_by_key(|a| a.position);
            let region = ProcessRegion {
                tid: threads.get(&tid_row).copied().unwrap_or(tid_row),
                start,
                end,
                name_id,
                category_id,
                correlation_id,
                stack_id,
                args: &args,
            };
            if !f(&region)? {
                return Ok(RegionsRead::Stopped);
            }
        }
        Ok(RegionsRead::Complete)
    }

    /// Hands every frame (module path, pc, names) to `f`.
    pub fn frames(&self, mut f: impl FnMut(FrameRow)) -> Result<()> {
        let sql = format!(
            "SELECT F.id, M.path, F.rel_pc, F.function, F.file, F.line FROM {} F
         LEFT JOIN {} M ON M.id = F.module_id",
            self.table("strobe_frame"),
            self.table("strobe_module")
        );
        each_row(&self.conn, &sql, |r| -> Result<bool> {
            let q = qerr(&sql);
            f(FrameRow {
                id: r.get(0).map_err(&q)?,
                module: text_ref(r.get_ref(1).map_err(&q)?),
                rel_pc: r.get::<_, Option<i64>>(2).map_err(&q)?.unwrap_or(0),
                function: text_ref(r.get_ref(3).map_err(&q)?),
                file: text_ref(r.get_ref(4).map_err(&q)?),
                line: r.get(5).map_err(&q)?,
            });
            Ok(true)
        })?;
        Ok(())
    }

    /// The leaf frame of call site `id` (its file and line not read);
    /// `None` when the call site or its frame is missing.
    pub fn leaf(&self, id: i64) -> Result<Option<FrameRow>> {
        let sql = format!(
            "SELECT M.path, F.rel_pc, F.function, F.id FROM {} C
                 JOIN {} F ON F.id = C.frame_id
                 LEFT JOIN {} M ON M.id = F.module_id WHERE C.id = ?1",
            self.table("strobe_callsite"),
            self.table("strobe_frame"),
            self.table("strobe_module")
        );
        self.conn
            .prepare_cached(&sql)
            .and_then(|mut q| {
                q.query_row([id], |r| {
                    Ok(FrameRow {
                        module: r.get(0)?,
                        rel_pc: r.get::<_, Option<i64>>(1)?.unwrap_or(0),
                        function: r.get(2)?,
                        id: r.get(3)?,
                        file: None,
                        line: None,
                    })
                })
                .map(Some)
                .or_else(|e| match e {
                    rusqlite::Error::QueryReturnedNoRows => Ok(None),
                    e => Err(e),
                })
            })
            .map_err(qerr(&sql))
    }

    /// The call sites, loaded for walking every stack; `None` when the
    /// process has none.
    pub fn stack_walk(&self) -> Result<Option<StackWalk>> {
        let sql = format!(
            "SELECT id, parent_id, frame_id FROM {}",
            self.table("strobe_callsite")
        );
        let mut callsites = IdMap::default();
        each_row(&self.conn, &sql, |r| -> Result<bool> {
            let q = qerr(&sql);
            callsites.insert(
                r.get(0).map_err(&q)?,
                (
                    r.get(1).map_err(&q)?,
                    r.get::<_, Option<i64>>(2).map_err(&q)?.unwrap_or(0),
                ),
            );
            Ok(true)
        })?;
        Ok((!callsites.is_empty()).then_some(StackWalk { callsites }))
    }

    /// The reader of the process's samples by row-id range; a sample of no
    /// known kind is of `time_kind`.
    pub fn sample_scan(&self, time_kind: SampleKind) -> Result<SampleScan> {
        let (sc, sf) = (&self.src.tables.schema, &self.src.tables.suffix);
        Ok(SampleScan {
            mapper: Mapper::new(&self.conn, sc, sf, time_kind)?,
        })
    }

    /// The reader of the process's counter values by row-id range.
    pub fn counter_scan(&self) -> Result<CounterScan> {
        let psql = format!(
            "SELECT id, name, units FROM {}",
            self.table("rocpd_info_pmc")
        );
        let mut counters = Vec::new();
        each_row(&self.conn, &psql, |r| -> Result<bool> {
            let q = qerr(&psql);
            counters.push(CounterName {
                id: r.get(0).map_err(&q)?,
                name: text_ref(r.get_ref(1).map_err(&q)?).unwrap_or_default(),
                unit: text_ref(r.get_ref(2).map_err(&q)?),
            });
            Ok(true)
        })?;
        let tsql = format!(
            "SELECT T.id, TH.tid FROM {} T
             LEFT JOIN {} TH ON TH.id = T.tid",
            self.table("rocpd_track"),
            self.table("rocpd_info_thread")
        );
        let mut tracks = IdMap::default();
        each_row(&self.conn, &tsql, |r| -> Result<bool> {
            let q = qerr(&tsql);
            tracks.insert(r.get(0).map_err(&q)?, r.get(1).map_err(&q)?);
            Ok(true)
        })?;
        Ok(CounterScan {
            known: counters.iter().map(|c| (c.id, ())).collect(),
            counters,
            tracks,
        })
    }
}

/// Deepest stack walked before a call-site chain is taken for a cycle.
const MAX_DEPTH: i64 = 100_000;

/// The call sites of a process, for walking every stack (see
/// [`ProcessTables::stack_walk`]).
pub struct StackWalk {
    /// Parent and frame id by call site id.
    callsites: IdMap<i64, (Option<i64>, i64)>,
}

impl StackWalk {
    /// Hands the frames of every stack of the process's events (by stack
    /// id, each leaf first) to `f` as (stack id, depth, frame id) until it
    /// returns false. A call-site chain deeper than 100 000 is an error (a
    /// cycle).
    pub fn each<E: From<DbError>>(
        &self,
        t: &ProcessTables,
        mut f: impl FnMut(i64, i64, i64) -> std::result::Result<bool, E>,
    ) -> std::result::Result<bool, E> {
        let sql = format!(
            "SELECT DISTINCT stack_id FROM {} WHERE stack_id IS NOT NULL ORDER BY stack_id",
            t.table("rocpd_event")
        );
        each_row(&t.conn, &sql, |r| {
            let leaf: i64 = r.get(0).map_err(qerr(&sql))?;
            let mut cur = Some(leaf);
            let mut depth = 0i64;
            while let Some(cs) = cur {
                let Some(&(parent, frame)) = self.callsites.get(&cs) else {
                    break;
                };
                if depth >= MAX_DEPTH {
                    return Err(DbError::Corrupt {
                        path: t.src.file.clone(),
                        detail: format!("call site {leaf} of {} forms a cycle", t.src.guid),
                    }
                    .into());
                }
                if !f(leaf, depth, frame)? {
                    return Ok(false);
                }
                cur = parent;
                depth += 1;
            }
            Ok(true)
        })
    }
}

/// The reader of one process's samples by row-id range: the one sample
/// reader of [`crate::scan`] (OS ids per track and what each event says,
/// loaded once and kept from one range to the next).
pub struct SampleScan {
    mapper: Mapper,
}

impl SampleScan {
    /// Hands the samples whose row id is in `rows` (half-open; the window
    /// applied), in storage order, to `f` until it returns false.
    pub fn read<E: From<DbError>>(
        &mut self,
        t: &ProcessTables,
        rows: Window,
        mut f: impl FnMut(&ScannedSample) -> std::result::Result<bool, E>,
    ) -> std::result::Result<bool, E> {
        let (sc, sf) = (&t.src.tables.schema, &t.src.tables.suffix);
        let sql = scan_sql(sc, sf, t.window, rows, false);
        each_row(&t.conn, &sql, |r| {
            let s = self.mapper.map(&t.conn, r, &sql)?;
            f(&s)
        })
    }
}

/// The reader of one process's counter values by row-id range: its
/// counters and the threads of its tracks, loaded once.
pub struct CounterScan {
    counters: Vec<CounterName>,
    known: IdMap<i64, ()>,
    tracks: IdMap<i64, Option<i64>>,
}

impl CounterScan {
    /// The process's counters.
    pub fn counters(&self) -> &[CounterName] {
        &self.counters
    }

    /// Hands the values whose row id is in `rows` (half-open; the window
    /// applied), in storage order, to `f` until it returns false. As the
    /// `strobe_counters` view, a value of no known counter is left out.
    pub fn read<E: From<DbError>>(
        &self,
        t: &ProcessTables,
        rows: Window,
        mut f: impl FnMut(&CounterValue) -> std::result::Result<bool, E>,
    ) -> std::result::Result<bool, E> {
        if self.counters.is_empty() {
            return Ok(true);
        }
        let mut conds = window_sql(t.window, "timestamp", "timestamp");
        conds.extend(rows.0.map(|lo| format!("rowid >= {lo}")));
        conds.extend(rows.1.map(|hi| format!("rowid < {hi}")));
        let sql = format!(
            "SELECT track_id, timestamp, value, pmc_id FROM {} {} ORDER BY rowid",
            t.table("strobe_counter_sample"),
            where_of(&conds)
        );
        each_row(&t.conn, &sql, |r| {
            let q = qerr(&sql);
            let track: Option<i64> = r.get(0).map_err(&q)?;
            let timestamp: i64 = r.get::<_, Option<i64>>(1).map_err(&q)?.unwrap_or(0);
            let value: Option<f64> = r.get(2).map_err(&q)?;
            let counter: i64 = r.get::<_, Option<i64>>(3).map_err(&q)?.unwrap_or(-1);
            if !self.known.contains_key(&counter) {
                return Ok(true);
            }
            let tid = track.and_then(|t| self.tracks.get(&t).copied().flatten());
            f(&CounterValue {
                counter,
                tid,
                timestamp,
                value,
            })
        })
    }
}
