//! Perfetto trace output (`.pftrace`).
//!
//! Owns [`PerfettoWriter`], a streaming encoder of Perfetto `TracePacket`s
//! (create it, feed it processes, threads, regions, samples and counters in
//! time order, finish it), and [`write_perfetto`], which feeds it a whole
//! profile. On-CPU samples become `PerfSample`s; off-CPU samples become
//! `off-CPU: <function>` slices over the blocked time on their thread's
//! track. Correlation ids become flows within a process; message keys
//! (`flow_out`/`flow_in` region arguments: an MPI send and the receive it
//! matched) become flows across processes. Memory stays bounded: the
//! writer keeps only the open regions (with the flows their ENDs end) and
//! off-CPU slices of each thread, the interning tables of the current
//! sequence (cleared and restarted past a fixed size), the track table
//! and up to a MiB of encoded packets not yet handed to its output. The
//! packets of the hot paths (plain track events, samples of interned
//! stacks) are encoded by hand, the same bytes prost writes for them. It
//! never reads a database itself in [`PerfettoWriter`] and never holds
//! the trace.

pub mod proto;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::io::Write;
use std::sync::Arc;

use prost::Message;
use strobe_db::visit::{
    CounterRow, ModuleRow, Order, ProcessRow, ProfileSink, RegionRow, Run, SampleEvent, Shift,
    Stacks, ThreadRecord,
};
use strobe_db::{Profile, SampleRow};

use crate::error::{ExportError, Result};
use crate::{Fast, FastMap};
use proto::*;

/// The packet sequence all data is written on.
const SEQ: u32 = 1;
/// The sequence of the clock snapshot.
const SEQ_CLOCKS: u32 = 2;
/// Interned entries kept before the sequence's incremental state is cleared.
const MAX_INTERNED: usize = 200_000;

/// What a conversion wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PerfettoStats {
    /// Packets written.
    pub packets: u64,
    /// Regions written (each a BEGIN and an END).
    pub slices: u64,
    /// Instant markers.
    pub instants: u64,
    /// Counter values.
    pub counter_values: u64,
    /// On-CPU samples (`PerfSample` packets).
    pub samples: u64,
    /// Off-CPU samples, each a slice (a BEGIN and an END) over the time
    /// the thread spent blocked.
    pub off_cpu_slices: u64,
    /// Track events plus samples (a slice, region or off-CPU, counts two).
    pub events: u64,
    /// Message flows started: `flow_out` values of regions (send side).
    pub message_flows_out: u64,
    /// Message flows ended: `flow_in` values of regions (receive side).
    pub message_flows_in: u64,
}

/// A stable, non-zero 64-bit hash (FNV-1a) used for track uuids and flow ids.
fn hash64(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in *p {
            h ^= *b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h.max(1)
}

/// Track uuid of a process.
pub fn process_uuid(guid: &str) -> u64 {
    hash64(&[b"p", guid.as_bytes()])
}
/// Track uuid of a thread.
pub fn thread_uuid(guid: &str, tid: i64) -> u64 {
    hash64(&[b"t", guid.as_bytes(), &tid.to_le_bytes()])
}

/// Flow id of a message key: the value of a region's `flow_out` (send
/// side) or `flow_in` (receive side) argument. It depends on the key
/// alone, never on the process, so that the two ends, recorded by
/// different processes, link. A key is a u64 in decimal; anything else is
/// hashed as text.
pub fn message_flow_id(key: &str) -> u64 {
    let key = key.trim();
    match key.parse::<u64>() {
        Ok(v) => hash64(&[b"mpi", &v.to_le_bytes()]),
        Err(_) => hash64(&[b"mpi", key.as_bytes()]),
    }
}

struct Lane {
    uuid: u64,
    /// End times of the open regions, innermost last.
    open: Vec<i64>,
}

struct ThreadState {
    name: String,
    guid: Arc<str>,
    tid: i64,
    /// The process's index in [`PerfettoWriter::procs`].
    proc: usize,
    shift: Shift,
    lanes: Vec<Lane>,
}

/// Slots of the cache of recently used threads (by tid).
const RECENT_THREADS: usize = 64;
/// Slots of the caches of recently interned event names and categories.
const RECENT_STRINGS: usize = 256;

/// The iids of recently interned strings by the address of their `Arc`
/// (each slot keeps its `Arc` alive, so an address is never reused while
/// cached): the readers hand out one `Arc` per distinct string, so this
/// skips hashing the text. Cleared with the interning state.
struct RecentStrings(Vec<Option<(Arc<str>, u64)>>);

impl RecentStrings {
    fn new() -> Self {
        RecentStrings(vec![None; RECENT_STRINGS])
    }

    fn slot(s: &Arc<str>) -> usize {
        (Arc::as_ptr(s).cast::<u8>() as usize >> 4) % RECENT_STRINGS
    }

    #[inline]
    fn get(&self, s: &Arc<str>) -> Option<u64> {
        match &self.0[Self::slot(s)] {
            Some((a, i)) if Arc::ptr_eq(a, s) => Some(*i),
            _ => None,
        }
    }

    fn put(&mut self, s: &Arc<str>, iid: u64) {
        self.0[Self::slot(s)] = Some((s.clone(), iid));
    }

    fn clear(&mut self) {
        self.0.iter_mut().for_each(|e| *e = None);
    }
}

/// An END to write: (end time, tie-break, thread index, lane index).
type PendingEnd = Reverse<(i64, u64, usize, usize)>;

/// Streaming Perfetto encoder.
///
/// Feed it in this order: [`PerfettoWriter::process`] for every process,
/// [`PerfettoWriter::thread`] for known threads (unknown ones get a track
/// on first use), then regions, samples and counters in time order (any
/// interleaving, each stream ordered), then [`PerfettoWriter::finish`]
/// (packets reach `out` in chunks: only `finish` writes the last one).
/// Regions of one thread that overlap without nesting go to extra child
/// tracks of the thread, so every track holds properly nested BEGIN/END
/// pairs. Timestamps are written as given plus the per-process shift
/// (see [`strobe_db::visit::clock_shifts`]), on `CLOCK_MONOTONIC`.
pub struct PerfettoWriter<W: Write> {
    out: W,
    /// Framed packets not yet handed to `out` (up to [`OUT_CHUNK`]).
    pending_out: Vec<u8>,
    /// A packet encoded by prost, before it is framed.
    buf: Vec<u8>,
    inter_buf: Vec<u8>,
    stats: PerfettoStats,
    shifts: HashMap<String, Shift>,
    modules: HashMap<(String, Arc<str>), ModuleRow>,
    described: HashSet<u64, Fast>,
    thread_index: FastMap<(Arc<str>, i64), usize>,
    /// Recently used threads by tid (a direct-mapped cache in front of
    /// `thread_index`).
    recent: Vec<Option<(Arc<str>, i64, usize)>>,
    threads: Vec<ThreadState>,
    /// Process guids by first use, so per-sample keys are integers.
    procs: FastMap<Arc<str>, usize>,
    counters: FastMap<(Arc<str>, Option<i64>, String), u64>,
    pending: BinaryHeap<PendingEnd>,
    push_seq: u64,
    /// Flows that end on a pending END (the receive side of messages), by
    /// the END's tie-break. The receive's END, not its BEGIN: a receive
    /// is often entered before the matching send, but returns after the
    /// send began, and the trace processor links a flow's end only to a
    /// flow it has already seen begin (in timestamp order).
    end_flows: FastMap<u64, Vec<u64>>,
    // Interning state of the sequence.
    needs_reset: bool,
    interned: usize,
    next_iid: u64,
    names: FastMap<Arc<str>, u64>,
    recent_names: RecentStrings,
    cats: FastMap<Arc<str>, u64>,
    recent_cats: RecentStrings,
    func_names: FastMap<String, u64>,
    paths: FastMap<Arc<str>, u64>,
    build_ids: FastMap<String, u64>,
    mappings: FastMap<(String, Arc<str>), u64>,
    frames: FastMap<crate::FrameKey, u64>,
    /// Call stack iids by (process index, call site id).
    callstacks: FastMap<(usize, i64), u64>,
    /// Off-CPU slice names per (process index, call stack), cleared with
    /// the interning state.
    off_cpu_names: FastMap<(usize, i64), Arc<str>>,
    off_cpu_category: Arc<str>,
}

/// The name of the slice of an off-CPU sample whose innermost frame is
/// `leaf` (`None`: no stack).
fn off_cpu_slice_name(leaf: Option<&strobe_db::ResolvedFrame>) -> String {
    match leaf {
        Some(f) => format!("off-CPU: {}", f.display_name()),
        None => "off-CPU: [no stack]".to_string(),
    }
}

/// Bytes of framed packets gathered before they are written to the output
/// at once.
const OUT_CHUNK: usize = 1 << 20;

/// A trace packet's timestamp (field 8) and trusted sequence id (field
/// 10), as every hand-encoded packet begins.
#[inline]
fn put_packet_head(b: &mut Vec<u8>, ts: u64) {
    put_key(b, 8, 0);
    put_varint(b, ts);
    put_key(b, 10, 0);
    put_varint(b, u64::from(SEQ));
}

/// Bytes of `v` as a varint.
#[inline]
fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

#[inline]
fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}
#[inline]
fn put_key(buf: &mut Vec<u8>, field: u32, wire: u32) {
    put_varint(buf, u64::from((field << 3) | wire));
}

impl<W: Write> PerfettoWriter<W> {
    /// Starts a trace on `out`: writes the clock snapshot (monotonic and
    /// boottime taken as equal at `clock_base`, see docs/exports.md) and the
    /// sequence defaults (`timestamp_clock_id` = MONOTONIC). `shifts` maps
    /// process guids to the ns added to their timestamps; `modules` gives
    /// mapping ranges and build ids.
    pub fn new(
        out: W,
        shifts: HashMap<String, Shift>,
        modules: Vec<ModuleRow>,
        clock_base: u64,
    ) -> Result<Self> {
        let mut w = PerfettoWriter {
            out,
            pending_out: Vec::with_capacity(OUT_CHUNK + 4096),
            buf: Vec::with_capacity(256),
            inter_buf: Vec::with_capacity(256),
            stats: PerfettoStats::default(),
            shifts,
            modules: modules
                .into_iter()
                .map(|m| ((m.guid.clone(), m.path.clone()), m))
                .collect(),
            described: HashSet::default(),
            thread_index: FastMap::default(),
            recent: vec![None; RECENT_THREADS],
            threads: Vec::new(),
            procs: FastMap::default(),
            counters: FastMap::default(),
            pending: BinaryHeap::new(),
            push_seq: 0,
            end_flows: FastMap::default(),
            needs_reset: true,
            interned: 0,
            next_iid: 1,
            names: FastMap::default(),
            recent_names: RecentStrings::new(),
            cats: FastMap::default(),
            recent_cats: RecentStrings::new(),
            func_names: FastMap::default(),
            paths: FastMap::default(),
            build_ids: FastMap::default(),
            mappings: FastMap::default(),
            frames: FastMap::default(),
            callstacks: FastMap::default(),
            off_cpu_names: FastMap::default(),
            off_cpu_category: Arc::from(strobe_db::SampleKind::OffCpu.category()),
        };
        w.emit(&TracePacket {
            trusted_packet_sequence_id: Some(SEQ_CLOCKS),
            clock_snapshot: Some(ClockSnapshot {
                clocks: vec![
                    Clock {
                        clock_id: Some(CLOCK_MONOTONIC),
                        timestamp: Some(clock_base),
                    },
                    Clock {
                        clock_id: Some(CLOCK_BOOTTIME),
                        timestamp: Some(clock_base),
                    },
                ],
                primary_trace_clock: None,
            }),
            ..Default::default()
        })?;
        w.reset_sequence()?;
        Ok(w)
    }

    /// Starts a packet of `len` bytes: writes its frame header (the
    /// `Trace.packet` key and length) and reserves room for it. Returns
    /// where the packet's bytes start, for [`PerfettoWriter::end_packet`].
    #[inline]
    fn begin_packet(&mut self, len: usize) -> (usize, usize) {
        self.pending_out.reserve(1 + 10 + len);
        self.pending_out.push(0x0a);
        put_varint(&mut self.pending_out, len as u64);
        (self.pending_out.len(), len)
    }

    /// Ends the packet begun at `start` (checking, in debug builds, that
    /// it has the length its header says): counts it and hands full
    /// chunks to the output.
    #[inline]
    fn end_packet(&mut self, (start, len): (usize, usize)) -> Result<()> {
        debug_assert_eq!(self.pending_out.len() - start, len, "packet length");
        self.stats.packets += 1;
        if self.pending_out.len() >= OUT_CHUNK {
            self.flush_pending()?;
        }
        Ok(())
    }

    fn flush_pending(&mut self) -> Result<()> {
        self.out.write_all(&self.pending_out)?;
        self.pending_out.clear();
        Ok(())
    }

    fn emit(&mut self, p: &TracePacket) -> Result<()> {
        self.buf.clear();
        p.encode(&mut self.buf)
            .expect("a Vec grows to any encoded length");
        let at = self.begin_packet(self.buf.len());
        self.pending_out.extend_from_slice(&self.buf);
        self.end_packet(at)
    }

    /// Clears the interning state and (re)writes the sequence defaults on a
    /// packet flagged "incremental state cleared".
    fn reset_sequence(&mut self) -> Result<()> {
        self.names.clear();
        self.recent_names.clear();
        self.cats.clear();
        self.recent_cats.clear();
        self.func_names.clear();
        self.paths.clear();
        self.build_ids.clear();
        self.mappings.clear();
        self.frames.clear();
        self.callstacks.clear();
        self.off_cpu_names.clear();
        self.interned = 0;
        self.next_iid = 1;
        self.needs_reset = false;
        self.emit(&TracePacket {
            trusted_packet_sequence_id: Some(SEQ),
            sequence_flags: Some(SEQ_INCREMENTAL_STATE_CLEARED | SEQ_NEEDS_INCREMENTAL_STATE),
            trace_packet_defaults: Some(TracePacketDefaults {
                timestamp_clock_id: Some(CLOCK_MONOTONIC),
                track_event_defaults: None,
            }),
            interned_data: Some(InternedData::default()),
            ..Default::default()
        })
    }

    fn iid(&mut self) -> u64 {
        let i = self.next_iid;
        self.next_iid += 1;
        self.interned += 1;
        i
    }

    fn shift(&self, guid: &str) -> Shift {
        self.shifts.get(guid).copied().unwrap_or_default()
    }

    fn describe(&mut self, d: TrackDescriptor) -> Result<()> {
        let uuid = d.uuid.unwrap_or(0);
        if self.described.insert(uuid) {
            self.emit(&TracePacket {
                trusted_packet_sequence_id: Some(SEQ),
                track_descriptor: Some(d),
                ..Default::default()
            })?;
        }
        Ok(())
    }

    /// Describes a process track (pid, command line, name).
    pub fn process(&mut self, p: &ProcessRow) -> Result<()> {
        let name = if p.hostname.is_empty() {
            p.short_name()
        } else {
            format!("{} ({})", p.short_name(), p.hostname)
        };
        self.describe(TrackDescriptor {
            uuid: Some(process_uuid(&p.guid)),
            process: Some(ProcessDescriptor {
                pid: Some(p.pid as i32),
                cmdline: p.command.split_whitespace().map(String::from).collect(),
                process_name: Some(name),
            }),
            ..Default::default()
        })
    }

    /// Describes a thread track (pid, tid, name).
    pub fn thread(&mut self, t: &ThreadRecord) -> Result<()> {
        let guid: Arc<str> = Arc::from(t.guid.as_str());
        self.thread_track(&guid, t.pid, t.tid, t.name.clone())?;
        Ok(())
    }

    /// The thread's index, describing its track on first use.
    fn thread_track(
        &mut self,
        guid: &Arc<str>,
        pid: i64,
        tid: i64,
        name: Option<String>,
    ) -> Result<usize> {
        let slot = (tid as usize) % RECENT_THREADS;
        if let Some((g, t, i)) = &self.recent[slot] {
            // Regions and samples carry guids of their own readers.
            if *t == tid && (Arc::ptr_eq(g, guid) || **g == **guid) {
                return Ok(*i);
            }
        }
        if let Some(i) = self.thread_index.get(&(guid.clone(), tid)).copied() {
            self.recent[slot] = Some((guid.clone(), tid, i));
            return Ok(i);
        }
        let uuid = thread_uuid(guid, tid);
        let name = name.unwrap_or_else(|| format!("thread {tid}"));
        let idx = self.threads.len();
        let next_proc = self.procs.len();
        let proc = *self.procs.entry(guid.clone()).or_insert(next_proc);
        self.threads.push(ThreadState {
            name: name.clone(),
            guid: guid.clone(),
            tid,
            proc,
            shift: self.shift(guid),
            lanes: vec![Lane {
                uuid,
                open: Vec::new(),
            }],
        });
        self.thread_index.insert((guid.clone(), tid), idx);
        self.describe(TrackDescriptor {
            uuid: Some(uuid),
            parent_uuid: Some(process_uuid(guid)),
            thread: Some(ThreadDescriptor {
                pid: Some(pid as i32),
                tid: Some(tid as i32),
                thread_name: Some(name),
            }),
            ..Default::default()
        })?;
        Ok(idx)
    }

    /// Encodes a plain track event (no annotations, no flows) by hand: the
    /// hot path of large traces. The bytes are those prost writes for the
    /// same [`TracePacket`] (fields in tag order).
    #[allow(clippy::too_many_arguments)]
    fn fast_event(
        &mut self,
        ts: u64,
        ty: i32,
        track: u64,
        name_iid: Option<u64>,
        cat_iid: Option<u64>,
        counter: Option<f64>,
        interned: Option<&InternedData>,
    ) -> Result<()> {
        let ev_len = cat_iid.map_or(0, |c| 1 + varint_len(c))
            + 1
            + varint_len(ty as u64)
            + name_iid.map_or(0, |n| 1 + varint_len(n))
            + 1
            + varint_len(track)
            + counter.map_or(0, |_| 2 + 8);
        let inter_len = match interned {
            Some(i) => {
                self.inter_buf.clear();
                i.encode(&mut self.inter_buf)
                    .expect("a Vec grows to any encoded length");
                let n = self.inter_buf.len();
                1 + varint_len(n as u64) + n
            }
            None => 0,
        };
        let len = 1 + varint_len(ts) + 2 + 1 + varint_len(ev_len as u64) + ev_len + inter_len + 2;
        let at = self.begin_packet(len);
        let b = &mut self.pending_out;
        put_packet_head(b, ts);
        put_key(b, 11, 2);
        put_varint(b, ev_len as u64);
        if let Some(c) = cat_iid {
            put_key(b, 3, 0);
            put_varint(b, c);
        }
        put_key(b, 9, 0);
        put_varint(b, ty as u64);
        if let Some(n) = name_iid {
            put_key(b, 10, 0);
            put_varint(b, n);
        }
        put_key(b, 11, 0);
        put_varint(b, track);
        if let Some(v) = counter {
            put_key(b, 44, 1);
            b.extend_from_slice(&v.to_le_bytes());
        }
        if interned.is_some() {
            put_key(b, 12, 2);
            put_varint(b, self.inter_buf.len() as u64);
            b.extend_from_slice(&self.inter_buf);
        }
        put_key(b, 13, 0);
        put_varint(b, u64::from(SEQ_NEEDS_INCREMENTAL_STATE));
        self.stats.events += 1;
        self.end_packet(at)
    }

    /// Encodes an on-CPU sample whose call stack is already interned (or
    /// absent) by hand: a `PerfSample` packet, the same bytes prost writes.
    #[inline]
    fn fast_sample(&mut self, ts: u64, pid: u32, tid: u32, callstack: Option<u64>) -> Result<()> {
        let sample_len = 1
            + varint_len(u64::from(pid))
            + 1
            + varint_len(u64::from(tid))
            + callstack.map_or(0, |c| 1 + varint_len(c));
        let len = 1 + varint_len(ts) + 2 + 2 + 2 + varint_len(sample_len as u64) + sample_len;
        let at = self.begin_packet(len);
        let b = &mut self.pending_out;
        put_packet_head(b, ts);
        put_key(b, 13, 0);
        put_varint(b, u64::from(SEQ_NEEDS_INCREMENTAL_STATE));
        put_key(b, 66, 2);
        put_varint(b, sample_len as u64);
        put_key(b, 2, 0);
        put_varint(b, u64::from(pid));
        put_key(b, 3, 0);
        put_varint(b, u64::from(tid));
        if let Some(c) = callstack {
            put_key(b, 4, 0);
            put_varint(b, c);
        }
        self.stats.samples += 1;
        self.stats.events += 1;
        self.end_packet(at)
    }

    /// Writes every END due at or before `t` (raw timestamp of the process
    /// that is about to be written; ends of other processes compare on their
    /// own clock, which only reorders packets across tracks).
    fn close_until(&mut self, t: i64) -> Result<()> {
        while let Some(Reverse((end, tie, th, lane))) = self.pending.peek().copied() {
            if end > t {
                break;
            }
            self.pending.pop();
            let ts = &mut self.threads[th];
            ts.lanes[lane].open.pop();
            let uuid = ts.lanes[lane].uuid;
            let at = (end + ts.shift).max(0) as u64;
            let flows = if self.end_flows.is_empty() {
                None
            } else {
                self.end_flows.remove(&tie)
            };
            match flows {
                None => self.fast_event(at, TYPE_SLICE_END, uuid, None, None, None, None)?,
                Some(terminating_flow_ids) => self.track_event(
                    at,
                    TrackEvent {
                        r#type: Some(TYPE_SLICE_END),
                        track_uuid: Some(uuid),
                        terminating_flow_ids,
                        ..Default::default()
                    },
                    None,
                )?,
            }
        }
        Ok(())
    }

    fn track_event(
        &mut self,
        ts: u64,
        ev: TrackEvent,
        interned: Option<InternedData>,
    ) -> Result<()> {
        self.stats.events += 1;
        self.emit(&TracePacket {
            timestamp: Some(ts),
            trusted_packet_sequence_id: Some(SEQ),
            sequence_flags: Some(SEQ_NEEDS_INCREMENTAL_STATE),
            track_event: Some(ev),
            interned_data: interned,
            ..Default::default()
        })
    }

    fn maybe_reset(&mut self) -> Result<()> {
        if self.needs_reset || self.interned >= MAX_INTERNED {
            self.reset_sequence()?;
        }
        Ok(())
    }

    fn intern_name(&mut self, name: &Arc<str>, inter: &mut Option<InternedData>) -> u64 {
        if let Some(i) = self.recent_names.get(name) {
            return i;
        }
        if let Some(i) = self.names.get(name).copied() {
            self.recent_names.put(name, i);
            return i;
        }
        let i = self.iid();
        self.names.insert(name.clone(), i);
        self.recent_names.put(name, i);
        inter
            .get_or_insert_with(InternedData::default)
            .event_names
            .push(EventName {
                iid: Some(i),
                name: Some(name.to_string()),
            });
        i
    }

    fn intern_cat(&mut self, cat: &Arc<str>, inter: &mut Option<InternedData>) -> u64 {
        if let Some(i) = self.recent_cats.get(cat) {
            return i;
        }
        if let Some(i) = self.cats.get(cat).copied() {
            self.recent_cats.put(cat, i);
            return i;
        }
        let i = self.iid();
        self.cats.insert(cat.clone(), i);
        self.recent_cats.put(cat, i);
        inter
            .get_or_insert_with(InternedData::default)
            .event_categories
            .push(EventCategory {
                iid: Some(i),
                name: Some(cat.to_string()),
            });
        i
    }

    /// Writes a region as a BEGIN now and an END at its end time (or, for a
    /// zero-length region, an INSTANT marker). Regions must arrive ordered
    /// by start, parents before children. A correlation id starts a flow
    /// within its process; a `flow_out` argument (a message's send side)
    /// starts the flow [`message_flow_id`] on the BEGIN and a `flow_in`
    /// argument (its receive side) ends it on the END, across processes.
    pub fn region(&mut self, r: &RegionRow) -> Result<()> {
        self.close_until(r.start)?;
        self.maybe_reset()?;
        let mut inter = None;
        let name_iid = self.intern_name(&r.name, &mut inter);
        let cat = r.category.as_ref().map(|c| self.intern_cat(c, &mut inter));
        let th = self.thread_track(&r.guid, r.pid, r.tid, None)?;
        let ts = (r.start + self.threads[th].shift).max(0) as u64;
        let plain = r.args.is_empty() && r.corr_id.is_none();
        let mut flows_out = Vec::new();
        let mut flows_in = Vec::new();
        for (name, _, value) in &r.args {
            match name.as_str() {
                "flow_out" => flows_out.push(message_flow_id(value)),
                "flow_in" => flows_in.push(message_flow_id(value)),
                _ => {}
            }
        }
        self.stats.message_flows_out += flows_out.len() as u64;
        self.stats.message_flows_in += flows_in.len() as u64;
        let track = if r.is_marker() {
            self.stats.instants += 1;
            self.threads[th].lanes[0].uuid
        } else {
            self.stats.slices += 1;
            let lane = self.pick_lane(th, r.end)?;
            self.push_seq += 1;
            self.pending
                .push(Reverse((r.end, u64::MAX - self.push_seq, th, lane)));
            if !flows_in.is_empty() {
                self.end_flows
                    .insert(u64::MAX - self.push_seq, std::mem::take(&mut flows_in));
            }
            self.threads[th].lanes[lane].uuid
        };
        let ty = if r.is_marker() {
            TYPE_INSTANT
        } else {
            TYPE_SLICE_BEGIN
        };
        if plain {
            return self.fast_event(ts, ty, track, Some(name_iid), cat, None, inter.as_ref());
        }
        let debug_annotations = r.args.iter().map(|(n, t, v)| annotation(n, t, v)).collect();
        let mut flow_ids: Vec<u64> = r
            .corr_id
            .map(|c| hash64(&[b"f", r.guid.as_bytes(), &c.to_le_bytes()]))
            .into_iter()
            .collect();
        flow_ids.append(&mut flows_out);
        self.track_event(
            ts,
            TrackEvent {
                r#type: Some(ty),
                track_uuid: Some(track),
                name_iid: Some(name_iid),
                category_iids: cat.into_iter().collect(),
                debug_annotations,
                flow_ids,
                // A marker's own receive side (its END is itself).
                terminating_flow_ids: flows_in,
                ..Default::default()
            },
            inter,
        )
    }

    /// The first lane of thread `th` where a region ending at `end` nests
    /// (a new child track if none), with the region pushed on it.
    fn pick_lane(&mut self, th: usize, end: i64) -> Result<usize> {
        let t = &mut self.threads[th];
        for (k, l) in t.lanes.iter_mut().enumerate() {
            if l.open.last().is_none_or(|top| *top >= end) {
                l.open.push(end);
                return Ok(k);
            }
        }
        let k = t.lanes.len();
        let uuid = hash64(&[
            b"l",
            t.guid.as_bytes(),
            &t.tid.to_le_bytes(),
            &(k as u64).to_le_bytes(),
        ]);
        t.lanes.push(Lane {
            uuid,
            open: vec![end],
        });
        let name = format!("{} (overlapping {k})", t.name);
        let parent = thread_uuid(&t.guid, t.tid);
        self.describe(TrackDescriptor {
            uuid: Some(uuid),
            name: Some(name),
            parent_uuid: Some(parent),
            ..Default::default()
        })?;
        Ok(k)
    }

    /// Writes one counter value on the counter's track (described on first
    /// use, under its thread or process).
    pub fn counter(&mut self, c: &CounterRow) -> Result<()> {
        self.close_until(c.timestamp)?;
        self.maybe_reset()?;
        let guid: Arc<str> = Arc::from(c.guid.as_str());
        let key = (guid.clone(), c.tid, c.name.clone());
        let uuid = match self.counters.get(&key) {
            Some(u) => *u,
            None => {
                let parent = match c.tid {
                    Some(t) => {
                        let th = self.thread_track(&guid, c.pid, t, None)?;
                        self.threads[th].lanes[0].uuid
                    }
                    None => process_uuid(&c.guid),
                };
                let uuid = hash64(&[
                    b"c",
                    c.guid.as_bytes(),
                    &c.tid.unwrap_or(-1).to_le_bytes(),
                    c.name.as_bytes(),
                ]);
                self.describe(TrackDescriptor {
                    uuid: Some(uuid),
                    name: Some(c.name.clone()),
                    parent_uuid: Some(parent),
                    counter: Some(CounterDescriptor {
                        unit_name: c.units.clone().filter(|u| !u.is_empty()),
                        ..Default::default()
                    }),
                    ..Default::default()
                })?;
                self.counters.insert(key, uuid);
                uuid
            }
        };
        self.stats.counter_values += 1;
        let ts = (c.timestamp + self.shift(&c.guid)).max(0) as u64;
        self.fast_event(ts, TYPE_COUNTER, uuid, None, None, Some(c.value), None)
    }

    /// Writes one on-CPU sample as a `PerfSample` packet, interning its
    /// frames, mappings, function names, build ids and the call stack (from
    /// `s.frames`, leaf first); an off-CPU sample (kind `off_cpu`) as a
    /// slice named `off-CPU: <innermost function>` on its thread's track,
    /// from its timestamp to timestamp + weight (the blocked time).
    pub fn sample(&mut self, s: &SampleRow) -> Result<()> {
        let guid: Arc<str> = Arc::from(s.guid.as_str());
        let e = SampleEvent {
            guid: &guid,
            pid: s.pid,
            tid: s.tid,
            timestamp: s.timestamp,
            stack_id: s.stack_id,
            kind: strobe_db::scan::kind_of(&s.kind).unwrap_or(strobe_db::SampleKind::Cpu),
            weight_ns: s.weight_ns,
        };
        self.sample_with(&e, &mut |_, _| Ok(s.frames.clone()))
    }

    /// Like [`PerfettoWriter::sample`], but the frames are only resolved
    /// (through `resolve(guid, stack_id)`, leaf first) the first time a
    /// call stack is seen on the current interning state: the sample's own
    /// `frames` are ignored.
    pub fn sample_with(
        &mut self,
        s: &SampleEvent<'_>,
        resolve: &mut dyn FnMut(&str, i64) -> Result<Vec<strobe_db::ResolvedFrame>>,
    ) -> Result<()> {
        self.sample_in(*s, resolve)
    }

    /// [`PerfettoWriter::sample_with`] of a borrowed sample.
    #[inline]
    fn sample_in(
        &mut self,
        s: SampleEvent<'_>,
        resolve: &mut dyn FnMut(&str, i64) -> Result<Vec<strobe_db::ResolvedFrame>>,
    ) -> Result<()> {
        self.close_until(s.timestamp)?;
        self.maybe_reset()?;
        if s.kind == strobe_db::SampleKind::OffCpu {
            return self.off_cpu(&s, resolve);
        }
        let th = self.thread_track(s.guid, s.pid, s.tid, None)?;
        let ts = (s.timestamp + self.threads[th].shift).max(0) as u64;
        let proc = self.threads[th].proc;
        let cs_iid = match s.stack_id {
            None => None,
            Some(id) => match self.callstacks.get(&(proc, id)) {
                Some(i) => Some(*i),
                None => return self.new_callstack_sample(&s, ts, proc, id, resolve),
            },
        };
        self.fast_sample(ts, s.pid as u32, s.tid as u32, cs_iid)
    }

    /// Writes an on-CPU sample whose call stack `id` is not interned yet,
    /// interning it (and its frames) on the sample's packet.
    #[cold]
    #[inline(never)]
    fn new_callstack_sample(
        &mut self,
        s: &SampleEvent<'_>,
        ts: u64,
        proc: usize,
        id: i64,
        resolve: &mut dyn FnMut(&str, i64) -> Result<Vec<strobe_db::ResolvedFrame>>,
    ) -> Result<()> {
        let mut inter = InternedData::default();
        let frames = resolve(s.guid, id)?;
        let mut frame_ids = Vec::with_capacity(frames.len());
        for f in frames.iter().rev() {
            frame_ids.push(self.intern_frame(s.guid, f, &mut inter));
        }
        let i = self.iid();
        inter.callstacks.push(Callstack {
            iid: Some(i),
            frame_ids,
        });
        self.callstacks.insert((proc, id), i);
        self.stats.samples += 1;
        self.stats.events += 1;
        self.emit(&TracePacket {
            timestamp: Some(ts),
            trusted_packet_sequence_id: Some(SEQ),
            sequence_flags: Some(SEQ_NEEDS_INCREMENTAL_STATE),
            interned_data: Some(inter),
            perf_sample: Some(PerfSample {
                cpu: None,
                pid: Some(s.pid as u32),
                tid: Some(s.tid as u32),
                callstack_iid: Some(i),
            }),
            ..Default::default()
        })
    }

    /// Writes an off-CPU sample as a slice over its blocked time (a BEGIN
    /// now, its END when due), nested like a region on the thread's lanes.
    #[inline(never)]
    fn off_cpu(
        &mut self,
        s: &SampleEvent<'_>,
        resolve: &mut dyn FnMut(&str, i64) -> Result<Vec<strobe_db::ResolvedFrame>>,
    ) -> Result<()> {
        let th = self.thread_track(s.guid, s.pid, s.tid, None)?;
        let proc = self.threads[th].proc;
        let name = match s.stack_id {
            None => Arc::from(off_cpu_slice_name(None).as_str()),
            Some(id) => match self.off_cpu_names.get(&(proc, id)) {
                Some(n) => n.clone(),
                None => {
                    let frames = resolve(s.guid, id)?;
                    let n: Arc<str> = Arc::from(off_cpu_slice_name(frames.first()).as_str());
                    if self.off_cpu_names.len() >= MAX_INTERNED {
                        self.off_cpu_names.clear();
                    }
                    self.off_cpu_names.insert((proc, id), n.clone());
                    n
                }
            },
        };
        let mut inter = None;
        let name_iid = self.intern_name(&name, &mut inter);
        let category = self.off_cpu_category.clone();
        let cat = self.intern_cat(&category, &mut inter);
        let end = s
            .timestamp
            .saturating_add(i64::try_from(s.weight_ns).unwrap_or(i64::MAX));
        let lane = self.pick_lane(th, end)?;
        self.push_seq += 1;
        self.pending
            .push(Reverse((end, u64::MAX - self.push_seq, th, lane)));
        self.stats.off_cpu_slices += 1;
        let track = self.threads[th].lanes[lane].uuid;
        let ts = (s.timestamp + self.threads[th].shift).max(0) as u64;
        self.fast_event(
            ts,
            TYPE_SLICE_BEGIN,
            track,
            Some(name_iid),
            Some(cat),
            None,
            inter.as_ref(),
        )
    }

    fn intern_frame(
        &mut self,
        guid: &str,
        f: &strobe_db::ResolvedFrame,
        inter: &mut InternedData,
    ) -> u64 {
        let key = (
            guid.to_string(),
            f.module.clone(),
            f.rel_pc,
            f.function.clone(),
        );
        if let Some(i) = self.frames.get(&key) {
            return *i;
        }
        let name = f.display_name();
        let fname = match self.func_names.get(&name) {
            Some(i) => *i,
            None => {
                let i = self.iid();
                inter.function_names.push(InternedString {
                    iid: Some(i),
                    str: Some(name.clone().into_bytes()),
                });
                self.func_names.insert(name, i);
                i
            }
        };
        let mapping = f
            .module
            .as_ref()
            .map(|m| self.intern_mapping(guid, m, inter));
        let i = self.iid();
        inter.frames.push(Frame {
            iid: Some(i),
            function_name_id: Some(fname),
            mapping_id: mapping,
            rel_pc: Some(f.rel_pc),
        });
        self.frames.insert(key, i);
        i
    }

    fn intern_mapping(&mut self, guid: &str, path: &Arc<str>, inter: &mut InternedData) -> u64 {
        let key = (guid.to_string(), path.clone());
        if let Some(i) = self.mappings.get(&key) {
            return *i;
        }
        let path_iid = match self.paths.get(path) {
            Some(i) => *i,
            None => {
                let i = self.iid();
                inter.mapping_paths.push(InternedString {
                    iid: Some(i),
                    str: Some(path.as_bytes().to_vec()),
                });
                self.paths.insert(path.clone(), i);
                i
            }
        };
        let module = self.modules.get(&key).cloned();
        let build = module.as_ref().and_then(|m| m.build_id.clone());
        let build_iid = build.map(|b| match self.build_ids.get(&b) {
            Some(i) => *i,
            None => {
                let i = self.iid();
                inter.build_ids.push(InternedString {
                    iid: Some(i),
                    str: Some(hex_bytes(&b)),
                });
                self.build_ids.insert(b, i);
                i
            }
        });
        let i = self.iid();
        inter.mappings.push(Mapping {
            iid: Some(i),
            build_id: build_iid,
            start: module.as_ref().map(|m| m.load_address),
            end: module.as_ref().map(|m| m.load_address + m.size),
            path_string_ids: vec![path_iid],
        });
        self.mappings.insert(key, i);
        i
    }

    /// Writes the ENDs of every region still open and flushes; returns the
    /// statistics and the output.
    pub fn finish(mut self) -> Result<(PerfettoStats, W)> {
        self.close_until(i64::MAX)?;
        self.flush_pending()?;
        self.out.flush()?;
        Ok((self.stats, self.out))
    }
}

/// A region argument as a typed debug annotation.
fn annotation(name: &str, ty: &str, value: &str) -> DebugAnnotation {
    let t = ty.to_ascii_lowercase();
    let mut a = DebugAnnotation {
        name: Some(name.to_string()),
        ..Default::default()
    };
    if t.contains("bool") {
        if let Ok(b) = value.parse::<bool>() {
            a.bool_value = Some(b);
            return a;
        }
    } else if t.contains("float") || t.contains("double") || t.starts_with('f') {
        if let Ok(d) = value.parse::<f64>() {
            a.double_value = Some(d);
            return a;
        }
    } else if t.starts_with('u') {
        if let Ok(u) = value.parse::<u64>() {
            a.uint_value = Some(u);
            return a;
        }
    } else if t.contains("int") || t.starts_with('i') || t == "long" {
        if let Ok(i) = value.parse::<i64>() {
            a.int_value = Some(i);
            return a;
        }
    }
    a.string_value = Some(value.to_string());
    a
}

/// A build id given in hex as raw bytes (as Perfetto expects); anything
/// that is not hex is kept as text.
fn hex_bytes(s: &str) -> Vec<u8> {
    if s.len().is_multiple_of(2) && !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit()) {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap_or(0))
            .collect()
    } else {
        s.as_bytes().to_vec()
    }
}

/// Converts a whole profile (all processes of all inputs, window applied)
/// to one Perfetto trace on `out`, streaming: regions, samples and counters
/// merged in time order (see [`Order::Merged`]).
pub fn write_perfetto<W: Write>(p: &Profile, out: W) -> Result<PerfettoStats> {
    let mut sink = Sink {
        out: Some(out),
        w: None,
    };
    p.visit(&mut sink)?;
    match sink.w {
        Some(w) => Ok(w.finish()?.0),
        None => Err(ExportError::Usage(
            "the Perfetto writer was not started".into(),
        )),
    }
}

/// [`PerfettoWriter`] as a sink of the profile, started on the [`Run`]
/// (the clock base, shifts and modules it needs).
struct Sink<W: Write> {
    out: Option<W>,
    w: Option<PerfettoWriter<W>>,
}

impl<W: Write> Sink<W> {
    fn writer(&mut self) -> Result<&mut PerfettoWriter<W>> {
        self.w
            .as_mut()
            .ok_or_else(|| ExportError::Usage("the Perfetto writer was not started".into()))
    }
}

impl<W: Write> ProfileSink for Sink<W> {
    type Error = ExportError;

    fn order(&self) -> Order {
        Order::Merged
    }

    fn begin(&mut self, run: &Run) -> Result<()> {
        let Some(out) = self.out.take() else {
            return Err(ExportError::Usage(
                "a Perfetto sink visits one profile".into(),
            ));
        };
        let base = run.first_start().max(0) as u64;
        let mut w = PerfettoWriter::new(out, run.shifts.clone(), run.modules.clone(), base)?;
        for pr in &run.processes {
            w.process(pr)?;
        }
        self.w = Some(w);
        Ok(())
    }

    fn thread(&mut self, t: &ThreadRecord) -> Result<()> {
        self.writer()?.thread(t)
    }

    fn region(&mut self, r: &RegionRow) -> Result<()> {
        self.writer()?.region(r)
    }

    fn sample(&mut self, s: &SampleEvent<'_>, stacks: &mut Stacks<'_>) -> Result<()> {
        self.writer()?
            .sample_in(*s, &mut |g, id| Ok(stacks.resolve(g, id)?))
    }

    fn counter(&mut self, c: &CounterRow) -> Result<()> {
        self.writer()?.counter(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(
        guid: &str,
        start: i64,
        end: i64,
        corr: Option<i64>,
        args: &[(&str, &str)],
    ) -> RegionRow {
        RegionRow {
            guid: Arc::from(guid),
            pid: 1,
            tid: 1,
            name: Arc::from("MPI_Sendrecv"),
            category: Some(Arc::from("mpi")),
            start,
            end,
            corr_id: corr,
            args: args
                .iter()
                .map(|(n, v)| (n.to_string(), "int".to_string(), v.to_string()))
                .collect(),
        }
    }

    /// (type, flow_ids, terminating_flow_ids) of every track event.
    fn events(bytes: &[u8]) -> Vec<(i32, Vec<u64>, Vec<u64>)> {
        Trace::decode(bytes)
            .unwrap()
            .packet
            .into_iter()
            .filter_map(|p| p.track_event)
            .map(|e| (e.r#type.unwrap(), e.flow_ids, e.terminating_flow_ids))
            .collect()
    }

    #[test]
    fn message_flows_begin_on_the_send_and_end_on_the_receive_end() {
        let mut w = PerfettoWriter::new(Vec::new(), HashMap::new(), Vec::new(), 0).unwrap();
        // A Sendrecv with a correlation id: both flows start on its BEGIN,
        // the received message's flow ends on its END.
        w.region(&region(
            "a",
            10,
            20,
            Some(5),
            &[("flow_out", "7"), ("flow_in", "8")],
        ))
        .unwrap();
        // A zero-length receive (a marker) ends its flow on itself.
        w.region(&region("b", 30, 30, None, &[("flow_in", "9")]))
            .unwrap();
        let (stats, out) = w.finish().unwrap();
        assert_eq!((stats.message_flows_out, stats.message_flows_in), (1, 2));
        let corr = hash64(&[b"f", b"a", &5i64.to_le_bytes()]);
        assert_eq!(
            events(&out),
            vec![
                (TYPE_SLICE_BEGIN, vec![corr, message_flow_id("7")], vec![]),
                (TYPE_SLICE_END, vec![], vec![message_flow_id("8")]),
                (TYPE_INSTANT, vec![], vec![message_flow_id("9")]),
            ]
        );
    }

    #[test]
    fn message_flow_ids_depend_on_the_key_alone() {
        assert_eq!(
            message_flow_id("18446744073709551615"),
            message_flow_id(" 18446744073709551615")
        );
        assert_ne!(message_flow_id("1"), message_flow_id("2"));
        // Text that is no u64 is hashed as text, never as 0 or an error.
        assert_ne!(message_flow_id("x1"), message_flow_id("0"));
        assert_ne!(message_flow_id("x1"), message_flow_id("x2"));
        // Not a correlation flow of any process.
        assert_ne!(
            message_flow_id("5"),
            hash64(&[b"f", b"a", &5i64.to_le_bytes()])
        );
    }
}
