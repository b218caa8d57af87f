//! The sample stream of a visit: one time-ordered stream of narrow rows,
//! and a bounded cache of resolved stacks.
//!
//! Owns [`Samples`] (every process's samples in time order, window
//! applied, kinds decided: a sample without a kind, from a database
//! written before kinds existed, is of the profile's time kind),
//! [`SampleEvent`] and [`Stacks`]. Rows carry ids, never resolved frames:
//! a sink resolves a stack the first time it meets it. It never writes to
//! an input and never formats output.

use std::sync::Arc;

use crate::reader::{Profile, ResolvedFrame};
use crate::scan::{open_attached, qerr, scan_sql, Mapper, ScannedSample as Raw, Window, PAGE};
use crate::writer::SampleKind;
use crate::Result;

/// One call-stack sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleEvent<'a> {
    /// Process guid.
    pub guid: &'a Arc<str>,
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

impl<'a> SampleEvent<'a> {
    /// The sample of a stream's row.
    pub(super) fn of(guid: &'a Arc<str>, r: &Raw) -> SampleEvent<'a> {
        SampleEvent {
            guid,
            pid: r.pid,
            tid: r.tid,
            timestamp: r.timestamp,
            stack_id: (r.stack_id >= 0).then_some(r.stack_id),
            kind: r.kind,
            weight_ns: r.weight_ns,
        }
    }
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
impl super::runsort::Record for Raw {
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

type DbResult<T> = crate::Result<T>;
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
        let io = |e: std::io::Error| crate::DbError::Io {
            path: std::env::temp_dir(),
            error: e,
        };
        let mut sorter = super::runsort::RunSorter::<Raw>::new();
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
    /// A finished stream (its buffers freed: a profile read in place has
    /// one finished stream per process).
    Done,
    /// A reader thread's batches.
    Thread {
        rx: std::sync::mpsc::Receiver<Batch>,
        batch: std::vec::IntoIter<Raw>,
    },
    /// An ordered query on the profile's connection (many processes).
    Local {
        conn: &'p rusqlite::Connection,
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
            Feed::Done => None,
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
                        *done = p.len() < PAGE;
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
    conn: &rusqlite::Connection,
    sql: &str,
    mapper: &mut Mapper,
    after: &mut Option<(i64, i64)>,
) -> DbResult<Vec<Raw>> {
    let (ts, id) = after.unwrap_or((i64::MIN, i64::MIN));
    let mut st = conn.prepare_cached(sql).map_err(qerr(sql))?;
    let mut rows = st.query([ts, id]).map_err(qerr(sql))?;
    let mut out = Vec::with_capacity(PAGE);
    while let Some(r) = rows.next().map_err(qerr(sql))? {
        let rowid: i64 = r.get(0).map_err(qerr(sql))?;
        let raw = mapper.map(conn, r, sql)?;
        *after = Some((raw.timestamp, rowid));
        out.push(raw);
    }
    Ok(out)
}

/// Every process's samples in time order (then thread id).
pub(super) struct Samples<'p> {
    guids: Vec<Arc<str>>,
    feeds: Vec<Feed<'p>>,
    /// The next row of every feed but the one of `first`.
    heads: std::collections::BinaryHeap<HeapEntry>,
    /// The earliest next row of all: its feed goes on without touching
    /// the heap while its rows stay before every other feed's (runs of
    /// one feed are common: a process, or the two halves of one).
    first: Option<HeapEntry>,
    started: bool,
    /// Table sets not started yet (a profile read in place, streamed a
    /// few processes at a time, see [`ACTIVE_SETS`]).
    pending: std::collections::VecDeque<usize>,
    /// Per table set: guid, file, (schema, suffix).
    sets: Vec<(Arc<str>, String, (String, String))>,
    time_kind: SampleKind,
    window: Window,
}

/// Processes of a profile read in place whose samples stream at once.
const ACTIVE_SETS: usize = 2;

impl Samples<'_> {
    /// Starts a reader thread over table set `k`; returns its feed's index.
    fn spawn(&mut self, k: usize, rows: Window) -> Result<usize> {
        let (guid, file, names) = self.sets[k].clone();
        let (tx, rx) = std::sync::mpsc::sync_channel(BATCHES_IN_FLIGHT);
        let (time_kind, window) = (self.time_kind, self.window);
        super::spawn_reader("strobe-samples", move || {
            reader_thread(file, names, time_kind, window, rows, tx)
        })?;
        self.guids.push(guid);
        self.feeds.push(Feed::Thread {
            rx,
            batch: Vec::new().into_iter(),
        });
        Ok(self.feeds.len() - 1)
    }

    /// Starts the next pending process and queues its first row.
    fn start_next(&mut self) -> Result<()> {
        while let Some(k) = self.pending.pop_front() {
            let f = self.spawn(k, (None, None))?;
            match self.feeds[f].next() {
                Some(Ok(r)) => {
                    self.heads
                        .push(std::cmp::Reverse(((r.timestamp, r.tid, f), Head(r))));
                    return Ok(());
                }
                Some(Err(e)) => return Err(e),
                None => self.feeds[f] = Feed::Done, // no sample in the window: the next one
            }
        }
        Ok(())
    }
}

/// A feed's next row keyed by (time, tid, feed), earliest first.
type HeapEntry = std::cmp::Reverse<((i64, i64, usize), Head)>;

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

impl Samples<'_> {
    /// The next sample as (its stream's index, the row): what
    /// [`Iterator::next`] returns, without the guid (see
    /// [`Samples::guid`]) and with the stack id -1 when there is none.
    pub(super) fn next_row(&mut self) -> Option<Result<(usize, Raw)>> {
        if !self.started {
            self.started = true;
            let mut finished = 0;
            for k in 0..self.feeds.len() {
                match self.feeds[k].next() {
                    Some(Ok(r)) => self
                        .heads
                        .push(std::cmp::Reverse(((r.timestamp, r.tid, k), Head(r)))),
                    Some(Err(e)) => return Some(Err(e)),
                    None => {
                        self.feeds[k] = Feed::Done;
                        finished += 1;
                    }
                }
            }
            for _ in 0..finished {
                if let Err(e) = self.start_next() {
                    return Some(Err(e));
                }
            }
        }
        if self.first.is_none() {
            self.first = self.heads.pop();
        }
        let std::cmp::Reverse(((_, _, k), Head(r))) = self.first.take()?;
        // The feed's next row stays first while it is before the earliest
        // row of the other feeds; otherwise it joins them in the heap.
        match self.feeds[k].next() {
            Some(Ok(n)) => {
                let e = std::cmp::Reverse(((n.timestamp, n.tid, k), Head(n)));
                self.first = Some(match self.heads.peek_mut() {
                    Some(mut top) if *top > e => std::mem::replace(&mut *top, e),
                    _ => e,
                });
            }
            Some(Err(e)) => return Some(Err(e)),
            None => {
                self.feeds[k] = Feed::Done;
                if let Err(e) = self.start_next() {
                    return Some(Err(e));
                }
            }
        }
        Some(Ok((k, r)))
    }

    /// The process guid of the rows of stream `k`.
    pub(super) fn guid(&self, k: usize) -> &Arc<str> {
        &self.guids[k]
    }
}

/// Streams every sample of the profile (window applied) ordered by time,
/// then thread id. Each process's samples are scanned in storage order by
/// a reader thread on its own connection and sorted there with bounded
/// memory (a single large process by two threads, each half of its rows),
/// the streams merged here; beyond [`MAX_READER_THREADS`] processes, each
/// is read through its timestamp index on the profile's connection. A
/// sample without a kind is of `time_kind` (the run's, see
/// [`Profile::time_kind`]).
pub(super) fn samples(p: &Profile, time_kind: SampleKind) -> Result<Samples<'_>> {
    let conn = p.conn();
    let window = p.window();
    let sets = p.table_sets();
    // A profile read in place is streamed a few processes at a time, each
    // by a reader thread on its own connection, each in time order.
    let federated = p.is_federated();
    let threaded = federated || sets.len() <= MAX_READER_THREADS;
    let mut out = Samples {
        guids: Vec::new(),
        feeds: Vec::new(),
        heads: Default::default(),
        first: None,
        started: false,
        pending: Default::default(),
        sets: sets
            .iter()
            .enumerate()
            .map(|(k, (ts, guid))| {
                (
                    Arc::from(guid.as_str()),
                    p.set_file(k).to_string_lossy().into_owned(),
                    (ts.schema.clone(), ts.suffix.clone()),
                )
            })
            .collect(),
        time_kind,
        window,
    };
    for (k, (ts, guid)) in sets.iter().enumerate() {
        let (sc, sf) = (&ts.schema, &ts.suffix);
        if federated {
            if k < ACTIVE_SETS {
                out.spawn(k, (None, None))?;
            } else {
                out.pending.push_back(k);
            }
        } else if threaded {
            let ranges = match crate::scan::split_point(conn, sc, &format!("rocpd_sample{sf}"))? {
                Some(mid) if sets.len() == 1 => vec![(None, Some(mid)), (Some(mid), None)],
                _ => vec![(None, None)],
            };
            for rows in ranges {
                out.spawn(k, rows)?;
            }
        } else {
            out.guids.push(Arc::from(guid.as_str()));
            out.feeds.push(Feed::Local {
                conn,
                sql: scan_sql(sc, sf, window, (None, None), true),
                mapper: Box::new(Mapper::new(conn, sc, sf, time_kind)?),
                after: None,
                page: Vec::new().into_iter(),
                done: false,
            });
        }
    }
    Ok(out)
}

/// Most stacks [`Stacks`] holds before it starts over.
const STACK_CACHE: usize = 65_536;

/// The call stacks of a visit's samples, resolved when first asked for:
/// by (process guid, call site id), leaf first, bounded (when full it is
/// cleared and refilled as stacks come back).
pub struct Stacks<'p> {
    p: &'p Profile,
    stacks: std::collections::HashMap<(Arc<str>, i64), Arc<[ResolvedFrame]>>,
}

impl<'p> Stacks<'p> {
    pub(super) fn new(p: &'p Profile) -> Stacks<'p> {
        Stacks {
            p,
            stacks: Default::default(),
        }
    }

    /// The frames (leaf first) of call site `id` of process `guid`.
    pub fn get(&mut self, guid: &Arc<str>, id: i64) -> Result<Arc<[ResolvedFrame]>> {
        if let Some(s) = self.stacks.get(&(guid.clone(), id)) {
            return Ok(s.clone());
        }
        if self.stacks.len() >= STACK_CACHE {
            self.stacks.clear();
        }
        let frames: Arc<[ResolvedFrame]> = self.p.resolve_stack(guid, id)?.into();
        self.stacks.insert((guid.clone(), id), frames.clone());
        Ok(frames)
    }

    /// The frames of call site `id` of process `guid`, resolved again
    /// without the cache (for sinks that keep their own).
    pub fn resolve(&self, guid: &str, id: i64) -> Result<Vec<ResolvedFrame>> {
        self.p.resolve_stack(guid, id)
    }
}
