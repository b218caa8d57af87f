//! Raw scans of a profile's tables for readers that need speed: each
//! process's suffixed tables read on connections of their own (reader
//! threads), `rocpd_sample` rows mapped to OS ids, stacks and kinds from
//! small per-process caches with the weight read from `extdata` without a
//! JSON parser, and the samples counted per (process, thread, stack) by
//! worker threads ([`sample_groups`], shared by the summary and the
//! exports).
//!
//! It never orders rows (exporters sort what they stream), never writes
//! and never formats output.

use std::collections::HashMap;
use std::sync::Arc;

use crate::{DbError, Profile, Result, SampleKind};

/// A hasher for integer row ids (one multiply), for the per-row lookups.
#[derive(Default)]
pub struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(*b as u64);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn write_i64(&mut self, v: i64) {
        self.write_u64(v as u64);
    }
}

/// A map keyed by row ids.
pub type IdMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<IdHasher>>;

/// Rows per page of a paged, ordered scan ([`scan_sql`] with `paged`).
pub const PAGE: usize = 4096;

/// Maps a rusqlite error of `sql` to [`DbError::Query`].
pub fn qerr(sql: &str) -> impl Fn(rusqlite::Error) -> DbError + '_ {
    move |e| DbError::Query {
        message: e.to_string(),
        sql: sql.to_string(),
    }
}

/// The middle row id of a large table (`table`, suffix included): a
/// split point for two reader threads. `None` for small tables, where one
/// is enough.
pub fn split_point(conn: &rusqlite::Connection, sc: &str, table: &str) -> Result<Option<i64>> {
    let sql = format!("SELECT MAX(rowid) FROM \"{sc}\".\"{table}\"");
    let max: Option<i64> = conn.query_row(&sql, [], |r| r.get(0)).map_err(qerr(&sql))?;
    Ok(max.filter(|m| *m > 100_000).map(|m| m / 2))
}

/// The file behind each schema of the connection (attach alias → path),
/// for reader threads that open their own connections.
pub fn attached_files(conn: &rusqlite::Connection) -> Result<HashMap<String, String>> {
    let mut files = HashMap::new();
    let sql = "PRAGMA database_list";
    let mut st = conn.prepare(sql).map_err(qerr(sql))?;
    let rows = st
        .query_map([], |r| {
            Ok((r.get::<_, String>(1)?, r.get::<_, Option<String>>(2)?))
        })
        .map_err(qerr(sql))?;
    for r in rows {
        let (name, file) = r.map_err(qerr(sql))?;
        if let Some(f) = file.filter(|f| !f.is_empty()) {
            files.insert(name, f);
        }
    }
    Ok(files)
}

/// A read-only connection of its own to `file`, attached as `schema` (so
/// suffixed table names read as on the profile's connection).
pub fn open_attached(file: &str, schema: &str) -> Result<rusqlite::Connection> {
    let conn = rusqlite::Connection::open_in_memory().map_err(qerr("open"))?;
    let att = format!("ATTACH DATABASE ?1 AS \"{schema}\"");
    conn.execute(
        &att,
        [crate::inputs::read_only_uri(std::path::Path::new(file))],
    )
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
pub fn columns(r: &rusqlite::Row<'_>) -> rusqlite::Result<(i64, i64, i64, u64)> {
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

/// Maps one process's sample rows (track and event row ids) to OS ids,
/// stacks and kinds: tracks loaded whole, events looked up once each.
pub struct Mapper {
    sc: String,
    sf: String,
    time_kind: SampleKind,
    tracks: IdMap<i64, (i64, i64)>,
    events: IdMap<i64, (i64, SampleKind)>,
}

impl Mapper {
    /// The mapper of the process whose tables are `"{sc}".<table>{sf}`
    /// (tracks loaded now); samples of no known kind are of `time_kind`.
    pub fn new(
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
            events: Default::default(),
        })
    }

    /// The OS (pid, tid) of a sample track; (0, 0) when unknown.
    pub fn thread(&self, track: i64) -> (i64, i64) {
        self.tracks.get(&track).copied().unwrap_or((0, 0))
    }

    /// The (stack id or -1, kind) of a sample's event.
    pub fn event(&mut self, conn: &rusqlite::Connection, id: i64) -> Result<(i64, SampleKind)> {
        if let Some(e) = self.events.get(&id) {
            return Ok(*e);
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
    pub fn map(
        &mut self,
        conn: &rusqlite::Connection,
        r: &rusqlite::Row<'_>,
        sql: &str,
    ) -> Result<ScannedSample> {
        let (track, timestamp, event, weight_ns) = columns(r).map_err(qerr(sql))?;
        let (pid, tid) = self.thread(track);
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
pub fn scan_sql(sc: &str, sf: &str, window: Window, rows: Window, paged: bool) -> String {
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
    /// [`crate::summary::time_kind`]).
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
type Tally = IdMap<(i64, i64), (u64, u64, u64)>;

/// Counts one process's samples (a row-id range of them) per track and
/// event on a connection of its own: a plain scan, no sort, weights read
/// from `extdata` without a JSON parser.
fn tally(file: &str, sc: &str, sf: &str, window: Window, rows: Window) -> Result<Tally> {
    let conn = open_attached(file, sc)?;
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

/// The samples aggregated per (process, thread, stack), ordered by guid,
/// pid, tid and stack, with their counts and summed weights on and off
/// CPU. `period_ns` is what an on-CPU sample without a weight stands for
/// (see [`crate::summary::sampling_period_ns`]). Each process (each half of
/// a large one) is counted by a worker with its own connection, two to
/// four at a time; memory grows with distinct stacks, never with samples.
pub fn sample_groups(p: &Profile, period_ns: i64) -> Result<Vec<SampleGroup>> {
    let time_kind = crate::summary::time_kind(p)?;
    let conn = p.connection();
    let window = p.window();
    let files = attached_files(conn)?;
    let sets = p.table_sets();
    let mut work = Vec::new();
    for (k, (ts, _)) in sets.iter().enumerate() {
        let Some(file) = files.get(ts.schema.as_str()) else {
            return Err(DbError::Query {
                message: format!("schema {} has no file", ts.schema),
                sql: String::new(),
            });
        };
        let split = split_point(conn, &ts.schema, &format!("rocpd_sample{}", ts.suffix))?;
        match split {
            Some(mid) => {
                work.push((k, file.clone(), (None, Some(mid))));
                work.push((k, file.clone(), (Some(mid), None)));
            }
            None => work.push((k, file.clone(), (None, None))),
        }
    }
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(2, 4)
        .min(work.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<Result<Vec<(usize, Tally)>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| -> Result<Vec<(usize, Tally)>> {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some((k, file, rows)) = work.get(i) else {
                            return Ok(out);
                        };
                        let ts = &sets[*k].0;
                        out.push((*k, tally(file, &ts.schema, &ts.suffix, window, *rows)?));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Ok(Vec::new())))
            .collect()
    });
    let mut per_set: Vec<Tally> = (0..sets.len()).map(|_| Tally::default()).collect();
    for r in results {
        for (k, t) in r? {
            for (key, v) in t {
                let e = per_set[k].entry(key).or_default();
                e.0 += v.0;
                e.1 += v.1;
                e.2 += v.2;
            }
        }
    }
    let period = period_ns.max(0) as u64;
    let mut groups: std::collections::BTreeMap<(usize, i64, i64, i64), SampleGroup> =
        Default::default();
    for (k, t) in per_set.into_iter().enumerate() {
        let (ts, guid) = &sets[k];
        let guid: Arc<str> = Arc::from(guid.as_str());
        let mut mapper = Mapper::new(conn, &ts.schema, &ts.suffix, time_kind)?;
        for ((track, event), (n, w, unweighted)) in t {
            let (pid, tid) = mapper.thread(track);
            let (stack, kind) = if event < 0 {
                (-1, time_kind)
            } else {
                mapper.event(conn, event)?
            };
            let g = groups
                .entry((k, pid, tid, stack))
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
    }
    Ok(groups
        .into_values()
        .filter(|g| g.samples + g.off_cpu_samples > 0)
        .collect())
}
