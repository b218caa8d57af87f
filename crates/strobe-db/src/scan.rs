//! Raw scans of a profile's tables for readers that need speed: each
//! process's suffixed tables read on connections of their own (reader
//! threads), `rocpd_sample` rows mapped to OS ids, stacks and kinds from
//! small per-process caches with the weight read from `extdata` without a
//! JSON parser, and the samples counted per (process, thread, stack) by
//! worker threads, handed over one process at a time in order
//! ([`for_each_process`], shared by the summary and the exports; the
//! worker pool, `parallel::ordered_parallel`, also serves the summary of a
//! profile read in place). A worker keeps the last file it opened for
//! the next process of the same file (a merged file holds many).
//!
//! It never orders rows (exporters sort what they stream), never writes
//! and never formats output.

use std::collections::HashMap;
use std::sync::Arc;

use crate::{DbError, Profile, Result, SampleKind};

/// A map keyed by row ids (foldhash's fast hasher, fixed seed: the keys
/// are our own ids).
pub type IdMap<K, V> = HashMap<K, V, foldhash::fast::FixedState>;

/// Rows per page of a paged, ordered scan ([`scan_sql`] with `paged`).
pub(crate) const PAGE: usize = 4096;

/// Maps a rusqlite error of `sql` to [`DbError::Query`].
pub(crate) fn qerr(sql: &str) -> impl Fn(rusqlite::Error) -> DbError + '_ {
    move |e| DbError::Query {
        message: e.to_string(),
        sql: sql.to_string(),
    }
}

/// The middle row id of a large table (`table`, suffix included): a
/// split point for two reader threads. `None` for small tables, where one
/// is enough.
pub(crate) fn split_point(
    conn: &rusqlite::Connection,
    sc: &str,
    table: &str,
) -> Result<Option<i64>> {
    let sql = format!("SELECT MAX(rowid) FROM \"{sc}\".\"{table}\"");
    let max: Option<i64> = conn.query_row(&sql, [], |r| r.get(0)).map_err(qerr(&sql))?;
    Ok(max.filter(|m| *m > 100_000).map(|m| m / 2))
}

/// A read-only connection of its own to `file`, attached as `schema` (so
/// suffixed table names read as on the profile's connection; `main` opens
/// the file itself, as a profile read in place names its sets).
pub(crate) fn open_attached(
    file: impl AsRef<std::path::Path>,
    schema: &str,
) -> Result<rusqlite::Connection> {
    let file = file.as_ref();
    if schema == "main" {
        return crate::inputs::open_read_only(file);
    }
    let conn = rusqlite::Connection::open_in_memory().map_err(qerr("open"))?;
    let att = format!("ATTACH DATABASE ?1 AS \"{schema}\"");
    conn.execute(&att, [crate::inputs::read_only_uri(file)])
        .map_err(qerr(&att))?;
    Ok(conn)
}

/// The kind named by an event category; `None` for anything else.
pub fn kind_of(category: &str) -> Option<SampleKind> {
    [SampleKind::Cpu, SampleKind::Wall, SampleKind::OffCpu]
        .into_iter()
        .find(|k| k.category() == category)
}

/// The weight in a sample's `extdata` (`{"weight_ns":N}`), read without a
/// JSON parser; 0 when absent.
#[inline]
pub fn weight_of(extdata: &[u8]) -> u64 {
    const KEY: &[u8] = b"\"weight_ns\":";
    let Some(at) = extdata.windows(KEY.len()).position(|w| w == KEY) else {
        return 0;
    };
    let mut v = 0u64;
    for &b in extdata[at + KEY.len()..]
        .iter()
        .skip_while(|b| **b == b' ')
        .take_while(|b| b.is_ascii_digit())
    {
        v = v.saturating_mul(10).saturating_add((b - b'0') as u64);
    }
    v
}

/// A row of [`scan_sql`] as (track id, timestamp, event id, weight): a
/// missing id is -1, a missing weight 0.
#[inline]
pub(crate) fn columns(r: &rusqlite::Row<'_>) -> rusqlite::Result<(i64, i64, i64, u64)> {
    use rusqlite::types::ValueRef;
    let id = |v: ValueRef<'_>| match v {
        ValueRef::Integer(i) => i,
        _ => -1,
    };
    Ok((
        id(r.get_ref(1)?),
        r.get(2)?,
        id(r.get_ref(3)?),
        match r.get_ref(4)? {
            ValueRef::Text(t) => weight_of(t),
            _ => 0,
        },
    ))
}

/// A sample row with its ids resolved: OS ids, stack and kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScannedSample {
    /// When (ns).
    pub timestamp: i64,
    /// OS pid.
    pub pid: i64,
    /// OS tid.
    pub tid: i64,
    /// Call site row id of the leaf; -1: no stack.
    pub stack_id: i64,
    /// What it measured.
    pub kind: SampleKind,
    /// The time it stands for (ns); 0 when none was recorded.
    pub weight_ns: u64,
}

/// Most sample events a [`Mapper`] keeps before it starts over.
const EVENT_CACHE: usize = 1 << 20;

/// Maps one process's sample rows (track and event row ids) to OS ids,
/// stacks and kinds: tracks loaded whole, events looked up once each
/// (at most [`EVENT_CACHE`] kept).
pub(crate) struct Mapper {
    sc: String,
    sf: String,
    time_kind: SampleKind,
    tracks: IdMap<i64, (i64, i64)>,
    /// The last track mapped and its ids: neighbouring samples are
    /// mostly of one thread.
    last_track: (i64, (i64, i64)),
    events: IdMap<i64, (i64, SampleKind)>,
}

impl Mapper {
    /// The mapper of the process whose tables are `"{sc}".<table>{sf}`
    /// (tracks loaded now); samples of no known kind are of `time_kind`.
    pub(crate) fn new(
        conn: &rusqlite::Connection,
        sc: &str,
        sf: &str,
        time_kind: SampleKind,
    ) -> Result<Mapper> {
        let sql = format!(
            "SELECT T.id, P.pid, TH.tid FROM \"{sc}\".\"rocpd_track{sf}\" T \
             LEFT JOIN \"{sc}\".\"rocpd_info_process{sf}\" P ON P.id = T.pid \
             LEFT JOIN \"{sc}\".\"rocpd_info_thread{sf}\" TH ON TH.id = T.tid"
        );
        let mut tracks = IdMap::default();
        let mut st = conn.prepare(&sql).map_err(qerr(&sql))?;
        let mut rows = st.query([]).map_err(qerr(&sql))?;
        while let Some(r) = rows.next().map_err(qerr(&sql))? {
            let id: i64 = r.get(0).map_err(qerr(&sql))?;
            let pid: Option<i64> = r.get(1).map_err(qerr(&sql))?;
            let tid: Option<i64> = r.get(2).map_err(qerr(&sql))?;
            tracks.insert(id, (pid.unwrap_or(0), tid.unwrap_or(0)));
        }
        Ok(Mapper {
            sc: sc.to_string(),
            sf: sf.to_string(),
            time_kind,
            tracks,
            last_track: (i64::MIN, (0, 0)),
            events: Default::default(),
        })
    }

    /// The OS (pid, tid) of a sample track; (0, 0) when unknown.
    #[inline]
    pub(crate) fn thread(&self, track: i64) -> (i64, i64) {
        self.tracks.get(&track).copied().unwrap_or((0, 0))
    }

    /// The (stack id or -1, kind) of a sample's event.
    #[inline]
    pub(crate) fn event(
        &mut self,
        conn: &rusqlite::Connection,
        id: i64,
    ) -> Result<(i64, SampleKind)> {
        match self.events.get(&id) {
            Some(e) => Ok(*e),
            None => self.load_event(conn, id),
        }
    }

    /// Looks event `id` up (the first time it is met) and keeps it.
    #[cold]
    fn load_event(&mut self, conn: &rusqlite::Connection, id: i64) -> Result<(i64, SampleKind)> {
        if self.events.len() >= EVENT_CACHE {
            self.events.clear();
        }
        let (sc, sf) = (&self.sc, &self.sf);
        let sql = format!(
            "SELECT E.stack_id, S.string FROM \"{sc}\".\"rocpd_event{sf}\" E \
             LEFT JOIN \"{sc}\".\"rocpd_string{sf}\" S ON S.id = E.category_id WHERE E.id = ?1"
        );
        let found = conn
            .prepare_cached(&sql)
            .and_then(|mut st| {
                st.query_row([id], |r| {
                    Ok((r.get::<_, Option<i64>>(0)?, r.get::<_, Option<String>>(1)?))
                })
            })
            .map(Some)
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(None),
                e => Err(e),
            })
            .map_err(qerr(&sql))?;
        let (stack, cat) = found.unwrap_or((None, None));
        let kind = cat.as_deref().and_then(kind_of).unwrap_or(self.time_kind);
        let e = (stack.unwrap_or(-1), kind);
        self.events.insert(id, e);
        Ok(e)
    }

    /// A row of [`scan_sql`] (rowid, track id, timestamp, event id,
    /// extdata) resolved.
    #[inline]
    pub(crate) fn map(
        &mut self,
        conn: &rusqlite::Connection,
        r: &rusqlite::Row<'_>,
        sql: &str,
    ) -> Result<ScannedSample> {
        let (track, timestamp, event, weight_ns) = columns(r).map_err(qerr(sql))?;
        if track != self.last_track.0 {
            self.last_track = (track, self.thread(track));
        }
        let (pid, tid) = self.last_track.1;
        let (stack_id, kind) = if event < 0 {
            (-1, self.time_kind)
        } else {
            self.event(conn, event)?
        };
        Ok(ScannedSample {
            timestamp,
            pid,
            tid,
            stack_id,
            kind,
            weight_ns,
        })
    }
}

/// The scan of one process's samples (rowid, track id, timestamp, event
/// id, extdata): window and row-id range applied; `paged`: in time order,
/// after the row `(?1, ?2)` (timestamp, rowid), one page at a time.
pub(crate) fn scan_sql(sc: &str, sf: &str, window: Window, rows: Window, paged: bool) -> String {
    let mut wh = Vec::new();
    if paged {
        wh.push("timestamp >= ?1 AND (timestamp > ?1 OR rowid > ?2)".to_string());
    }
    if let Some(lo) = window.0 {
        wh.push(format!("timestamp >= {lo}"));
    }
    if let Some(hi) = window.1 {
        wh.push(format!("timestamp <= {hi}"));
    }
    if let Some(a) = rows.0 {
        wh.push(format!("rowid >= {a}"));
    }
    if let Some(b) = rows.1 {
        wh.push(format!("rowid < {b}"));
    }
    format!(
        "SELECT rowid, track_id, timestamp, event_id, extdata FROM \"{sc}\".\"rocpd_sample{sf}\"{}{}",
        if wh.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", wh.join(" AND "))
        },
        if paged {
            format!(" ORDER BY timestamp, rowid LIMIT {PAGE}")
        } else {
            String::new()
        }
    )
}

/// A `(from, to)` range; `None`: unbounded.
pub type Window = (Option<i64>, Option<i64>);
/// The call-stack samples of one (process, thread, stack), on and off CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleGroup {
    /// Process guid.
    pub guid: Arc<str>,
    /// OS pid.
    pub pid: i64,
    /// OS tid.
    pub tid: i64,
    /// Call site row id of the leaf (`None`: no stack).
    pub stack_id: Option<i64>,
    /// On-CPU samples (of the profile's time kind, see
    /// [`Profile::time_kind`]).
    pub samples: u64,
    /// Time the on-CPU samples stand for (ns): the sum of their weights,
    /// where a sample without a weight (a database written before weights
    /// existed) counts one sampling period.
    pub cpu_ns: u64,
    /// Off-CPU samples (kind `off_cpu`).
    pub off_cpu_samples: u64,
    /// Blocked time the off-CPU samples stand for (ns): the sum of their
    /// weights.
    pub off_cpu_ns: u64,
}

/// Per (track id, event id): samples, summed weights, samples without a
/// weight.
pub(crate) type Tally = IdMap<(i64, i64), (u64, u64, u64)>;

/// Counts one process's samples (a row-id range of them) per track and
/// event on `conn`: a plain scan, no sort, weights read from `extdata`
/// without a JSON parser.
pub(crate) fn tally(
    conn: &rusqlite::Connection,
    sc: &str,
    sf: &str,
    window: Window,
    rows: Window,
) -> Result<Tally> {
    let sql = scan_sql(sc, sf, window, rows, false);
    let mut st = conn.prepare(&sql).map_err(qerr(&sql))?;
    let mut q = st.query([]).map_err(qerr(&sql))?;
    let mut t = Tally::default();
    while let Some(r) = q.next().map_err(qerr(&sql))? {
        let (track, _, event, w) = columns(r).map_err(qerr(&sql))?;
        let e = t.entry((track, event)).or_default();
        e.0 += 1;
        e.1 += w;
        e.2 += (w == 0) as u64;
    }
    Ok(t)
}

/// One process's samples counted per (thread, stack), and, when asked
/// for, its stacks resolved: what [`for_each_process`] hands over.
#[derive(Debug, Clone)]
pub struct ProcessSamples {
    /// The table set (see [`Profile::table_sets`]).
    pub set: usize,
    /// Process guid.
    pub guid: Arc<str>,
    /// The groups, ordered by pid, tid and stack; only groups with samples.
    pub groups: Vec<SampleGroup>,
    /// The frames (leaf first) of every stack of `groups`, when resolving
    /// was asked for; empty otherwise.
    pub stacks: IdMap<i64, Arc<[crate::ResolvedFrame]>>,
}

/// The groups of one process from its tally: OS ids, stacks and kinds
/// looked up on `conn`; with `resolve`, its stacks resolved there too.
#[allow(clippy::too_many_arguments)]
pub(crate) fn map_tally(
    conn: &rusqlite::Connection,
    ts: &crate::schema::TableSet,
    set: usize,
    guid: &Arc<str>,
    file: &std::path::Path,
    t: Tally,
    time_kind: SampleKind,
    period: u64,
    resolve: bool,
) -> Result<ProcessSamples> {
    let mut mapper = Mapper::new(conn, &ts.schema, &ts.suffix, time_kind)?;
    let mut groups: std::collections::BTreeMap<(i64, i64, i64), SampleGroup> = Default::default();
    for ((track, event), (n, w, unweighted)) in t {
        let (pid, tid) = mapper.thread(track);
        let (stack, kind) = if event < 0 {
            (-1, time_kind)
        } else {
            mapper.event(conn, event)?
        };
        let g = groups
            .entry((pid, tid, stack))
            .or_insert_with(|| SampleGroup {
                guid: guid.clone(),
                pid,
                tid,
                stack_id: (stack >= 0).then_some(stack),
                samples: 0,
                cpu_ns: 0,
                off_cpu_samples: 0,
                off_cpu_ns: 0,
            });
        if kind == SampleKind::OffCpu {
            g.off_cpu_samples += n;
            g.off_cpu_ns += w;
        } else if kind == time_kind {
            g.samples += n;
            g.cpu_ns += w + unweighted * period;
        }
    }
    let groups: Vec<SampleGroup> = groups
        .into_values()
        .filter(|g| g.samples + g.off_cpu_samples > 0)
        .collect();
    let mut stacks = IdMap::default();
    if resolve {
        let mut cache = crate::reader::StackCache::default();
        for g in &groups {
            if let Some(id) = g.stack_id {
                if let std::collections::hash_map::Entry::Vacant(e) = stacks.entry(id) {
                    e.insert(Arc::from(cache.resolve(conn, ts, set, guid, file, id)?));
                }
            }
        }
    }
    Ok(ProcessSamples {
        set,
        guid: guid.clone(),
        groups,
        stacks,
    })
}

thread_local! {
    /// The file a reader thread read last (path, schema name, connection):
    /// the next process of the same file (a merged file holds many) reads
    /// on it instead of opening the file again.
    static LAST_FILE: std::cell::RefCell<Option<(std::path::PathBuf, String, rusqlite::Connection)>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `f` on a connection of this thread's own to set `ts`'s file
/// (schema named as `ts` says), inside one read transaction (one shared
/// lock for the many small queries that follow, instead of one per
/// statement). The connection is kept for the thread's next call on the
/// same file.
pub(crate) fn with_file<T>(
    file: &std::path::Path,
    ts: &crate::schema::TableSet,
    f: impl FnOnce(&rusqlite::Connection) -> Result<T>,
) -> Result<T> {
    LAST_FILE.with(|last| {
        let mut last = last.borrow_mut();
        let same = last
            .as_ref()
            .is_some_and(|(p, s, _)| p == file && *s == ts.schema);
        if !same {
            *last = None;
            let conn = open_attached(file, &ts.schema)?;
            conn.execute_batch("BEGIN").map_err(qerr("BEGIN"))?;
            *last = Some((file.to_path_buf(), ts.schema.clone(), conn));
        }
        let (_, _, conn) = last.as_ref().expect("set above");
        f(conn)
    })
}

/// The work items of a scan of `table` over every process of `p`: (set,
/// row-id range), one per process, or two halves of a large one when the
/// inputs are attached (its split point is read on the profile's
/// connection).
pub(crate) fn work_items(p: &Profile, table: &str) -> Result<Vec<(usize, Window)>> {
    let mut work = Vec::new();
    for (k, (ts, _)) in p.table_sets().iter().enumerate() {
        let split = if p.is_federated() {
            None
        } else {
            split_point(p.conn(), &ts.schema, &format!("{table}{}", ts.suffix))?
        };
        match split {
            Some(mid) => {
                work.push((k, (None, Some(mid))));
                work.push((k, (Some(mid), None)));
            }
            None => work.push((k, (None, None))),
        }
    }
    Ok(work)
}

/// Hands every process's samples, counted per (thread, stack) with their
/// counts and summed weights on and off CPU (see [`SampleGroup`]), to `f`,
/// one process at a time in table-set order, with its stacks resolved
/// when `resolve` is set. `period_ns` is what an on-CPU sample without a
/// weight stands for (see [`Profile::sampling_period_ns`]). Each
/// process (each half of a large one, when the inputs are attached) is
/// counted by a worker on a connection of its own, two to four at a time,
/// at most `parallel::LOOKAHEAD` items ahead of the one handed over: memory grows
/// with that many processes' distinct stacks, never with samples or with
/// the number of processes.
pub fn for_each_process(
    p: &Profile,
    period_ns: i64,
    resolve: bool,
    f: &mut dyn FnMut(ProcessSamples) -> Result<()>,
) -> Result<()> {
    let time_kind = p.time_kind()?;
    let window = p.window();
    let sets = p.table_sets();
    let period = period_ns.max(0) as u64;
    let files: Vec<std::path::PathBuf> = (0..sets.len())
        .map(|k| p.set_file(k).to_path_buf())
        .collect();
    // Work items: (set, row-id range, whole set?). A large process is split
    // in two halves when the inputs are attached; its halves are combined
    // and mapped here, on the profile's connection.
    let work: Vec<(usize, Window, bool)> = work_items(p, "rocpd_sample")?
        .into_iter()
        .map(|(k, rows)| (k, rows, rows == (None, None)))
        .collect();
    let count = |i: usize| -> Result<std::result::Result<ProcessSamples, Tally>> {
        let (k, rows, whole) = work[i];
        let (ts, guid) = &sets[k];
        let file = &files[k];
        with_file(file, ts, |conn| {
            let t = tally(conn, &ts.schema, &ts.suffix, window, rows)?;
            if !whole {
                return Ok(Err(t));
            }
            let guid: Arc<str> = Arc::from(guid.as_str());
            Ok(Ok(map_tally(
                conn, ts, k, &guid, file, t, time_kind, period, resolve,
            )?))
        })
    };
    let mut halves: Option<Tally> = None;
    crate::parallel::ordered_parallel(work.len(), &count, &mut |i, done| match done {
        Ok(ps) => f(ps),
        Err(t) => match halves.take() {
            None => {
                halves = Some(t);
                Ok(())
            }
            Some(mut a) => {
                for (key, v) in t {
                    let e = a.entry(key).or_default();
                    e.0 += v.0;
                    e.1 += v.1;
                    e.2 += v.2;
                }
                let k = work[i].0;
                let (ts, guid) = &sets[k];
                let guid: Arc<str> = Arc::from(guid.as_str());
                f(map_tally(
                    p.conn(),
                    ts,
                    k,
                    &guid,
                    &files[k],
                    a,
                    time_kind,
                    period,
                    resolve,
                )?)
            }
        },
    })
}

/// The samples aggregated per (process, thread, stack), ordered by guid,
/// pid, tid and stack, with their counts and summed weights on and off
/// CPU: every group of [`for_each_process`] in one vector (which grows
/// with processes × threads × stacks: over many processes, fold them one
/// process at a time with [`for_each_process`] instead).
pub fn sample_groups(p: &Profile, period_ns: i64) -> Result<Vec<SampleGroup>> {
    let mut out = Vec::new();
    for_each_process(p, period_ns, false, &mut |ps| {
        out.extend(ps.groups);
        Ok(())
    })?;
    Ok(out)
}
