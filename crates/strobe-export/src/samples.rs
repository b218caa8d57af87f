//! The call-stack samples as the exporters read them: one time-ordered
//! stream of narrow rows, and a bounded cache of resolved stacks.
//!
//! Owns [`samples`] (every process's samples in time order, window
//! applied, kinds decided: a sample without a kind, from a database
//! written before kinds existed, is of the profile's time kind) and
//! [`StackCache`]. Rows carry ids, never resolved frames: a consumer
//! resolves a stack the first time it meets it. It never writes to an
//! input and never formats output.

use std::sync::Arc;

use strobe_db::{Profile, ResolvedFrame, SampleKind};

use crate::error::Result;
use crate::source::{open_attached, qerr};

/// One call-stack sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleEvent {
    /// Process guid.
    pub guid: Arc<str>,
    /// OS pid.
    pub pid: i64,
    /// OS tid.
    pub tid: i64,
    /// When (ns, the process's clock).
    pub timestamp: i64,
    /// Call site row id of the leaf (`None`: no stack).
    pub stack_id: Option<i64>,
    /// What it measured.
    pub kind: SampleKind,
    /// The time it stands for (ns); 0 when the database holds no weight.
    pub weight_ns: u64,
}

/// The kind named by an event category; `None` for anything else.
pub fn kind_of(category: &str) -> Option<SampleKind> {
    [SampleKind::Cpu, SampleKind::Wall, SampleKind::OffCpu]
        .into_iter()
        .find(|k| k.category() == category)
}

/// The weight in a sample's `extdata` (`{"weight_ns":N}`), read without a
/// JSON parser; 0 when absent.
fn weight_of(extdata: &[u8]) -> u64 {
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
fn columns(r: &strobe_db::rusqlite::Row<'_>) -> strobe_db::rusqlite::Result<(i64, i64, i64, u64)> {
    use strobe_db::rusqlite::types::ValueRef;
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

/// A sample with its ids resolved to OS ids, as sorted and spilled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Raw {
    timestamp: i64,
    pid: i64,
    tid: i64,
    /// -1: no stack.
    stack_id: i64,
    kind: SampleKind,
    weight_ns: u64,
}

fn kind_code(k: SampleKind) -> i64 {
    k as i64
}

fn kind_from_code(c: i64) -> SampleKind {
    match c {
        1 => SampleKind::Wall,
        2 => SampleKind::OffCpu,
        _ => SampleKind::Cpu,
    }
}

/// Spilled as four words: time; pid and tid (32 bits each, as Linux
/// ids); kind (top 4 bits) and stack id + 1 (0: none); weight.
impl crate::runsort::Record for Raw {
    type Key = (i64, i64);
    const WORDS: usize = 4;
    fn key(&self) -> (i64, i64) {
        (self.timestamp, self.tid)
    }
    fn words(&self) -> [i64; 8] {
        [
            self.timestamp,
            (self.pid << 32) | (self.tid & 0xffff_ffff),
            (kind_code(self.kind) << 60) | (self.stack_id + 1),
            self.weight_ns as i64,
            0,
            0,
            0,
            0,
        ]
    }
    fn from_words(w: &[i64; 8]) -> Self {
        Raw {
            timestamp: w[0],
            pid: w[1] >> 32,
            tid: w[1] as i32 as i64,
            stack_id: (w[2] & ((1 << 60) - 1)) - 1,
            kind: kind_from_code(w[2] >> 60),
            weight_ns: w[3] as u64,
        }
    }
}

/// Maps one process's sample rows (track and event row ids) to OS ids,
/// stacks and kinds: tracks loaded whole, events looked up once each.
struct Mapper {
    sc: String,
    sf: String,
    time_kind: SampleKind,
    tracks: crate::perfetto::FastMap<i64, (i64, i64)>,
    events: crate::perfetto::FastMap<i64, (i64, SampleKind)>,
}

type DbResult<T> = std::result::Result<T, strobe_db::DbError>;

impl Mapper {
    fn new(
        conn: &strobe_db::rusqlite::Connection,
        sc: &str,
        sf: &str,
        time_kind: SampleKind,
    ) -> DbResult<Mapper> {
        let sql = format!(
            "SELECT T.id, P.pid, TH.tid FROM \"{sc}\".\"rocpd_track{sf}\" T \
             LEFT JOIN \"{sc}\".\"rocpd_info_process{sf}\" P ON P.id = T.pid \
             LEFT JOIN \"{sc}\".\"rocpd_info_thread{sf}\" TH ON TH.id = T.tid"
        );
        let mut tracks = crate::perfetto::FastMap::default();
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

    /// The (stack id or -1, kind) of a sample's event.
    fn event(
        &mut self,
        conn: &strobe_db::rusqlite::Connection,
        id: i64,
    ) -> DbResult<(i64, SampleKind)> {
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
                strobe_db::rusqlite::Error::QueryReturnedNoRows => Ok(None),
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
    fn map(
        &mut self,
        conn: &strobe_db::rusqlite::Connection,
        r: &strobe_db::rusqlite::Row<'_>,
        sql: &str,
    ) -> DbResult<Raw> {
        let (track, timestamp, event, weight_ns) = columns(r).map_err(qerr(sql))?;
        let (pid, tid) = self.tracks.get(&track).copied().unwrap_or((0, 0));
        let (stack_id, kind) = if event < 0 {
            (-1, self.time_kind)
        } else {
            self.event(conn, event)?
        };
        Ok(Raw {
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
fn scan_sql(sc: &str, sf: &str, window: Window, rows: Window, paged: bool) -> String {
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
            format!(" ORDER BY timestamp, rowid LIMIT {BATCH}")
        } else {
            String::new()
        }
    )
}

type Window = (Option<i64>, Option<i64>);
type Batch = DbResult<Vec<Raw>>;

/// Rows per batch a reader thread sends.
const BATCH: usize = 4096;
/// Batches in flight per reader thread.
const BATCHES_IN_FLIGHT: usize = 4;
/// Most processes read by their own threads.
const MAX_READER_THREADS: usize = 8;

/// Scans one process's samples (a row-id range of them) on its own
/// connection, sorts them with bounded memory and sends them in order.
fn reader_thread(
    file: String,
    (sc, sf): (String, String),
    time_kind: SampleKind,
    window: Window,
    rows: Window,
    tx: std::sync::mpsc::SyncSender<Batch>,
) {
    let run = || -> DbResult<()> {
        let conn = open_attached(&file, &sc)?;
        let mut mapper = Mapper::new(&conn, &sc, &sf, time_kind)?;
        let sql = scan_sql(&sc, &sf, window, rows, false);
        let io = |e: std::io::Error| strobe_db::DbError::Io {
            path: std::env::temp_dir(),
            error: e,
        };
        let mut sorter = crate::runsort::RunSorter::<Raw>::new();
        {
            let mut st = conn.prepare(&sql).map_err(qerr(&sql))?;
            let mut q = st.query([]).map_err(qerr(&sql))?;
            while let Some(r) = q.next().map_err(qerr(&sql))? {
                sorter.push(mapper.map(&conn, r, &sql)?).map_err(io)?;
            }
        }
        let mut batch = Vec::with_capacity(BATCH);
        for rec in sorter.finish().map_err(io)? {
            batch.push(rec.map_err(io)?);
            if batch.len() == BATCH {
                let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                if tx.send(Ok(full)).is_err() {
                    return Ok(()); // the consumer stopped reading
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

/// Where one stream of a process's ordered samples comes from.
enum Feed<'p> {
    /// A reader thread's batches.
    Thread {
        rx: std::sync::mpsc::Receiver<Batch>,
        batch: std::vec::IntoIter<Raw>,
    },
    /// An ordered query on the profile's connection (many processes).
    Local {
        conn: &'p strobe_db::rusqlite::Connection,
        sql: String,
        mapper: Box<Mapper>,
        /// Rows read so far (the query restarts after them in pages).
        after: Option<(i64, i64)>,
        page: std::vec::IntoIter<Raw>,
        done: bool,
    },
}

impl Feed<'_> {
    fn next(&mut self) -> Option<DbResult<Raw>> {
        match self {
            Feed::Thread { rx, batch } => loop {
                if let Some(r) = batch.next() {
                    return Some(Ok(r));
                }
                match rx.recv() {
                    Ok(Ok(b)) => *batch = b.into_iter(),
                    Ok(Err(e)) => return Some(Err(e)),
                    Err(_) => return None,
                }
            },
            Feed::Local {
                conn,
                sql,
                mapper,
                after,
                page,
                done,
            } => loop {
                if let Some(r) = page.next() {
                    return Some(Ok(r));
                }
                if *done {
                    return None;
                }
                match local_page(conn, sql, mapper, after) {
                    Ok(p) => {
                        *done = p.len() < BATCH;
                        *page = p.into_iter();
                    }
                    Err(e) => {
                        *done = true;
                        return Some(Err(e));
                    }
                }
            },
        }
    }
}

/// The next page of an ordered local scan ([`scan_sql`] with `paged`):
/// rows after `after` (timestamp, rowid). Paging keeps no statement
/// running between calls.
fn local_page(
    conn: &strobe_db::rusqlite::Connection,
    sql: &str,
    mapper: &mut Mapper,
    after: &mut Option<(i64, i64)>,
) -> DbResult<Vec<Raw>> {
    let (ts, id) = after.unwrap_or((i64::MIN, i64::MIN));
    let mut st = conn.prepare_cached(sql).map_err(qerr(sql))?;
    let mut rows = st.query([ts, id]).map_err(qerr(sql))?;
    let mut out = Vec::with_capacity(BATCH);
    while let Some(r) = rows.next().map_err(qerr(sql))? {
        let rowid: i64 = r.get(0).map_err(qerr(sql))?;
        let raw = mapper.map(conn, r, sql)?;
        *after = Some((raw.timestamp, rowid));
        out.push(raw);
    }
    Ok(out)
}

/// Every process's samples in time order (then thread id).
pub struct Samples<'p> {
    guids: Vec<Arc<str>>,
    feeds: Vec<Feed<'p>>,
    heads: std::collections::BinaryHeap<std::cmp::Reverse<((i64, i64, usize), Head)>>,
    started: bool,
}

/// A feed's next row riding in the heap (ordered by the key beside it).
#[derive(Debug, Clone, Copy)]
struct Head(Raw);
impl PartialEq for Head {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for Head {}
impl PartialOrd for Head {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Head {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}

impl Iterator for Samples<'_> {
    type Item = Result<SampleEvent>;
    fn next(&mut self) -> Option<Result<SampleEvent>> {
        if !self.started {
            self.started = true;
            for k in 0..self.feeds.len() {
                match self.feeds[k].next() {
                    Some(Ok(r)) => self
                        .heads
                        .push(std::cmp::Reverse(((r.timestamp, r.tid, k), Head(r)))),
                    Some(Err(e)) => return Some(Err(e.into())),
                    None => {}
                }
            }
        }
        // The feed of the earliest row replaces it in place (one sift).
        let mut top = self.heads.peek_mut()?;
        let std::cmp::Reverse(((_, _, k), Head(r))) = *top;
        match self.feeds[k].next() {
            Some(Ok(n)) => *top = std::cmp::Reverse(((n.timestamp, n.tid, k), Head(n))),
            Some(Err(e)) => return Some(Err(e.into())),
            None => {
                std::collections::binary_heap::PeekMut::pop(top);
            }
        }
        Some(Ok(SampleEvent {
            guid: self.guids[k].clone(),
            pid: r.pid,
            tid: r.tid,
            timestamp: r.timestamp,
            stack_id: (r.stack_id >= 0).then_some(r.stack_id),
            kind: r.kind,
            weight_ns: r.weight_ns,
        }))
    }
}

/// Streams every sample of the profile (window applied) ordered by time,
/// then thread id. Each process's samples are scanned in storage order by
/// a reader thread on its own connection and sorted there with bounded
/// memory (a single large process by two threads, each half of its rows),
/// the streams merged here; beyond [`MAX_READER_THREADS`] processes, each
/// is read through its timestamp index on the profile's connection.
pub fn samples(p: &Profile) -> Result<Samples<'_>> {
    let time_kind = strobe_db::summary::time_kind(p)?;
    let conn = p.connection();
    let window = p.window();
    let files = crate::source::attached_files(conn)?;
    let sets = p.table_sets();
    let threaded = sets.len() <= MAX_READER_THREADS;
    let (mut guids, mut feeds) = (Vec::new(), Vec::new());
    for (ts, guid) in &sets {
        let (sc, sf) = (&ts.schema, &ts.suffix);
        let guid: Arc<str> = Arc::from(guid.as_str());
        match files.get(sc.as_str()) {
            Some(file) if threaded => {
                let ranges = match crate::source::split_point(conn, sc, &format!("rocpd_sample{sf}"))? {
                    Some(mid) if sets.len() == 1 => vec![(None, Some(mid)), (Some(mid), None)],
                    _ => vec![(None, None)],
                };
                for rows in ranges {
                    let (tx, rx) = std::sync::mpsc::sync_channel(BATCHES_IN_FLIGHT);
                    let (file, names) = (file.clone(), (sc.clone(), sf.clone()));
                    std::thread::Builder::new()
                        .name("strobe-export-samples".into())
                        .spawn(move || reader_thread(file, names, time_kind, window, rows, tx))?;
                    guids.push(guid.clone());
                    feeds.push(Feed::Thread {
                        rx,
                        batch: Vec::new().into_iter(),
                    });
                }
            }
            _ => {
                guids.push(guid);
                feeds.push(Feed::Local {
                    conn,
                    sql: scan_sql(sc, sf, window, (None, None), true),
                    mapper: Box::new(Mapper::new(conn, sc, sf, time_kind)?),
                    after: None,
                    page: Vec::new().into_iter(),
                    done: false,
                });
            }
        }
    }
    Ok(Samples {
        guids,
        feeds,
        heads: Default::default(),
        started: false,
    })
}

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
    /// [`strobe_db::summary::time_kind`]).
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
type Tally = crate::perfetto::FastMap<(i64, i64), (u64, u64, u64)>;

/// Counts one process's samples (a row-id range of them) per track and
/// event on a connection of its own: a plain scan, no sort, weights read
/// from `extdata` without a JSON parser.
fn tally(file: &str, sc: &str, sf: &str, window: Window, rows: Window) -> DbResult<Tally> {
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
/// (see [`crate::pprof::sampling_period_ns`]). Each process (each half of
/// a large one) is counted by a worker with its own connection, two to
/// four at a time; memory grows with distinct stacks, never with samples.
pub fn groups(p: &Profile, period_ns: i64) -> Result<Vec<SampleGroup>> {
    let time_kind = strobe_db::summary::time_kind(p)?;
    let conn = p.connection();
    let window = p.window();
    let files = crate::source::attached_files(conn)?;
    let sets = p.table_sets();
    let mut work = Vec::new();
    for (k, (ts, _)) in sets.iter().enumerate() {
        let Some(file) = files.get(ts.schema.as_str()) else {
            return Err(crate::error::ExportError::Db(strobe_db::DbError::Query {
                message: format!("schema {} has no file", ts.schema),
                sql: String::new(),
            }));
        };
        let split = crate::source::split_point(conn, &ts.schema, &format!("rocpd_sample{}", ts.suffix))?;
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
    let results: Vec<DbResult<Vec<(usize, Tally)>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| -> DbResult<Vec<(usize, Tally)>> {
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
            let (pid, tid) = mapper.tracks.get(&track).copied().unwrap_or((0, 0));
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

/// Most stacks a [`StackCache`] holds before it starts over.
const STACK_CACHE: usize = 65_536;

/// Resolved call stacks by (process guid, call site id), leaf first,
/// bounded: when full it is cleared and refilled as stacks come back.
#[derive(Default)]
pub struct StackCache {
    stacks: std::collections::HashMap<(Arc<str>, i64), Arc<[ResolvedFrame]>>,
}

impl StackCache {
    /// The frames (leaf first) of call site `id` of process `guid`.
    pub fn get(&mut self, p: &Profile, guid: &Arc<str>, id: i64) -> Result<Arc<[ResolvedFrame]>> {
        if let Some(s) = self.stacks.get(&(guid.clone(), id)) {
            return Ok(s.clone());
        }
        if self.stacks.len() >= STACK_CACHE {
            self.stacks.clear();
        }
        let frames: Arc<[ResolvedFrame]> = p.resolve_stack(guid, id)?.into();
        self.stacks.insert((guid.clone(), id), frames.clone());
        Ok(frames)
    }
}
