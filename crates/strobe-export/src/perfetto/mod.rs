//! Perfetto trace output (`.pftrace`).
//!
//! Owns [`PerfettoWriter`], a streaming encoder of Perfetto `TracePacket`s
//! (create it, feed it processes, threads, regions, samples and counters in
//! time order, finish it), and [`write_perfetto`], which feeds it a whole
//! profile. Memory stays bounded: the writer keeps only the open regions of
//! each thread, the interning tables of the current sequence (cleared and
//! restarted past a fixed size) and the track table. It never reads a
//! database itself in [`PerfettoWriter`] and never holds the trace.

pub mod proto;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::io::Write;
use std::sync::Arc;

use prost::Message;
use strobe_db::{CounterRecord, Profile, SampleRecord, ThreadRecord};

use crate::error::Result;
use crate::source::{self, ModuleRow, ProcessRow, RegionRow};
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
    /// Samples (`PerfSample` packets).
    pub samples: u64,
    /// Track events plus samples (a slice counts two).
    pub events: u64,
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

struct Lane {
    uuid: u64,
    /// End times of the open regions, innermost last.
    open: Vec<i64>,
}

struct ThreadState {
    name: String,
    pid: i64,
    lanes: Vec<Lane>,
}

/// Streaming Perfetto encoder.
///
/// Feed it in this order: [`PerfettoWriter::process`] for every process,
/// [`PerfettoWriter::thread`] for known threads (unknown ones get a track
/// on first use), then regions, samples and counters in time order (any
/// interleaving, each stream ordered), then [`PerfettoWriter::finish`].
/// Regions of one thread that overlap without nesting go to extra child
/// tracks of the thread, so every track holds properly nested BEGIN/END
/// pairs. Timestamps are written as given plus the per-process shift
/// (see [`crate::source::clock_shifts`]), on `CLOCK_MONOTONIC`.
pub struct PerfettoWriter<W: Write> {
    out: W,
    buf: Vec<u8>,
    frame: Vec<u8>,
    stats: PerfettoStats,
    shifts: HashMap<String, i64>,
    procs: HashMap<String, i64>,
    modules: HashMap<(String, Arc<str>), ModuleRow>,
    described: HashSet<u64>,
    threads: HashMap<(String, i64), ThreadState>,
    counters: HashMap<(String, Option<i64>, String), u64>,
    pending: BinaryHeap<Reverse<(i64, u64, u64, String)>>,
    push_seq: u64,
    lane_of: HashMap<u64, (String, i64, usize)>,
    // Interning state of the sequence.
    needs_reset: bool,
    interned: usize,
    next_iid: u64,
    names: HashMap<String, u64>,
    cats: HashMap<String, u64>,
    func_names: HashMap<String, u64>,
    paths: HashMap<Arc<str>, u64>,
    build_ids: HashMap<String, u64>,
    mappings: HashMap<(String, Arc<str>), u64>,
    frames: HashMap<source::FrameKey, u64>,
    callstacks: HashMap<(String, i64), u64>,
}

impl<W: Write> PerfettoWriter<W> {
    /// Starts a trace on `out`: writes the clock snapshot (monotonic and
    /// boottime taken as equal at `clock_base`, see docs/exports.md) and the
    /// sequence defaults (`timestamp_clock_id` = MONOTONIC).
    pub fn new(
        out: W,
        shifts: HashMap<String, i64>,
        modules: Vec<ModuleRow>,
        clock_base: u64,
    ) -> Result<Self> {
        let mut w = PerfettoWriter {
            out,
            buf: Vec::with_capacity(256),
            frame: Vec::with_capacity(16),
            stats: PerfettoStats::default(),
            shifts,
            procs: HashMap::new(),
            modules: modules
                .into_iter()
                .map(|m| ((m.guid.clone(), m.path.clone()), m))
                .collect(),
            described: HashSet::new(),
            threads: HashMap::new(),
            counters: HashMap::new(),
            pending: BinaryHeap::new(),
            push_seq: 0,
            lane_of: HashMap::new(),
            needs_reset: true,
            interned: 0,
            next_iid: 1,
            names: HashMap::new(),
            cats: HashMap::new(),
            func_names: HashMap::new(),
            paths: HashMap::new(),
            build_ids: HashMap::new(),
            mappings: HashMap::new(),
            frames: HashMap::new(),
            callstacks: HashMap::new(),
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

    fn emit(&mut self, p: &TracePacket) -> Result<()> {
        self.buf.clear();
        p.encode(&mut self.buf)
            .expect("a Vec grows to any encoded length");
        self.frame.clear();
        self.frame.push(0x0a);
        prost::encoding::encode_varint(self.buf.len() as u64, &mut self.frame);
        self.out.write_all(&self.frame)?;
        self.out.write_all(&self.buf)?;
        self.stats.packets += 1;
        Ok(())
    }

    /// Clears the interning state and (re)writes the sequence defaults on a
    /// packet flagged "incremental state cleared".
    fn reset_sequence(&mut self) -> Result<()> {
        self.names.clear();
        self.cats.clear();
        self.func_names.clear();
        self.paths.clear();
        self.build_ids.clear();
        self.mappings.clear();
        self.frames.clear();
        self.callstacks.clear();
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

    fn ts(&self, guid: &str, t: i64) -> u64 {
        (t + self.shifts.get(guid).copied().unwrap_or(0)).max(0) as u64
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
        self.procs.insert(p.guid.clone(), p.pid);
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
        self.thread_track(&t.guid, t.pid, t.tid, t.name.clone())?;
        Ok(())
    }

    fn thread_track(
        &mut self,
        guid: &str,
        pid: i64,
        tid: i64,
        name: Option<String>,
    ) -> Result<u64> {
        let uuid = thread_uuid(guid, tid);
        if !self.described.contains(&uuid) {
            let name = name.unwrap_or_else(|| format!("thread {tid}"));
            self.threads.insert(
                (guid.to_string(), tid),
                ThreadState {
                    name: name.clone(),
                    pid,
                    lanes: vec![Lane {
                        uuid,
                        open: Vec::new(),
                    }],
                },
            );
            self.lane_of.insert(uuid, (guid.to_string(), tid, 0));
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
        }
        Ok(uuid)
    }

    /// Writes every END due at or before `t` (raw timestamp of the process
    /// that is about to be written; ends of other processes compare on their
    /// own clock, which only reorders packets across tracks).
    fn close_until(&mut self, t: i64) -> Result<()> {
        while let Some(Reverse((end, _, uuid, _))) = self.pending.peek() {
            if *end > t {
                break;
            }
            let (end, uuid) = (*end, *uuid);
            let Some(Reverse((_, _, _, guid))) = self.pending.pop() else {
                break;
            };
            if let Some((g, tid, lane)) = self.lane_of.get(&uuid).cloned() {
                if let Some(th) = self.threads.get_mut(&(g, tid)) {
                    th.lanes[lane].open.pop();
                }
            }
            let ts = self.ts(&guid, end);
            self.track_event(
                ts,
                TrackEvent {
                    r#type: Some(TYPE_SLICE_END),
                    track_uuid: Some(uuid),
                    ..Default::default()
                },
                None,
            )?;
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

    fn intern_name(&mut self, name: &str, inter: &mut InternedData) -> u64 {
        if let Some(i) = self.names.get(name) {
            return *i;
        }
        let i = self.iid();
        self.names.insert(name.to_string(), i);
        inter.event_names.push(EventName {
            iid: Some(i),
            name: Some(name.to_string()),
        });
        i
    }

    fn intern_cat(&mut self, cat: &str, inter: &mut InternedData) -> u64 {
        if let Some(i) = self.cats.get(cat) {
            return *i;
        }
        let i = self.iid();
        self.cats.insert(cat.to_string(), i);
        inter.event_categories.push(EventCategory {
            iid: Some(i),
            name: Some(cat.to_string()),
        });
        i
    }

    /// Writes a region as a BEGIN now and an END at its end time (or, for a
    /// zero-length region, an INSTANT marker). Regions must arrive ordered
    /// by start, parents before children.
    pub fn region(&mut self, r: &RegionRow) -> Result<()> {
        self.close_until(r.start)?;
        self.maybe_reset()?;
        let mut inter = InternedData::default();
        let name_iid = self.intern_name(&r.name, &mut inter);
        let cat = r
            .category
            .as_deref()
            .map(|c| self.intern_cat(c, &mut inter));
        let thread = self.thread_track(&r.guid, r.pid, r.tid, None)?;
        let debug_annotations = r.args.iter().map(|(n, t, v)| annotation(n, t, v)).collect();
        let flow_ids = r
            .corr_id
            .map(|c| vec![hash64(&[b"f", r.guid.as_bytes(), &c.to_le_bytes()])])
            .unwrap_or_default();
        let ts = self.ts(&r.guid, r.start);
        let inter =
            (!inter.event_names.is_empty() || !inter.event_categories.is_empty()).then_some(inter);
        if r.is_marker() {
            self.stats.instants += 1;
            return self.track_event(
                ts,
                TrackEvent {
                    r#type: Some(TYPE_INSTANT),
                    track_uuid: Some(thread),
                    name_iid: Some(name_iid),
                    category_iids: cat.into_iter().collect(),
                    debug_annotations,
                    flow_ids,
                    ..Default::default()
                },
                inter,
            );
        }
        let lane = self.pick_lane(&r.guid, r.tid, r.end)?;
        self.push_seq += 1;
        self.pending.push(Reverse((
            r.end,
            u64::MAX - self.push_seq,
            lane,
            r.guid.clone(),
        )));
        self.stats.slices += 1;
        self.track_event(
            ts,
            TrackEvent {
                r#type: Some(TYPE_SLICE_BEGIN),
                track_uuid: Some(lane),
                name_iid: Some(name_iid),
                category_iids: cat.into_iter().collect(),
                debug_annotations,
                flow_ids,
                ..Default::default()
            },
            inter,
        )
    }

    /// The first lane of the thread where a region ending at `end` nests
    /// (a new child track if none), with the region pushed on it.
    fn pick_lane(&mut self, guid: &str, tid: i64, end: i64) -> Result<u64> {
        let key = (guid.to_string(), tid);
        let th = self.threads.get_mut(&key).expect("thread track exists");
        for l in th.lanes.iter_mut() {
            if l.open.last().is_none_or(|top| *top >= end) {
                l.open.push(end);
                return Ok(l.uuid);
            }
        }
        let k = th.lanes.len();
        let uuid = hash64(&[
            b"l",
            guid.as_bytes(),
            &tid.to_le_bytes(),
            &(k as u64).to_le_bytes(),
        ]);
        th.lanes.push(Lane {
            uuid,
            open: vec![end],
        });
        let name = format!("{} (overlapping {k})", th.name);
        let pid = th.pid;
        let _ = pid;
        self.lane_of.insert(uuid, (guid.to_string(), tid, k));
        self.describe(TrackDescriptor {
            uuid: Some(uuid),
            name: Some(name),
            parent_uuid: Some(thread_uuid(guid, tid)),
            ..Default::default()
        })?;
        Ok(uuid)
    }

    /// Writes one counter value on the counter's track (described on first
    /// use, under its thread or process).
    pub fn counter(&mut self, c: &CounterRecord) -> Result<()> {
        self.close_until(c.timestamp)?;
        self.maybe_reset()?;
        let key = (c.guid.clone(), c.tid, c.name.clone());
        let uuid = match self.counters.get(&key) {
            Some(u) => *u,
            None => {
                let parent = match c.tid {
                    Some(t) => self.thread_track(&c.guid, c.pid, t, None)?,
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
        let ts = self.ts(&c.guid, c.timestamp);
        self.track_event(
            ts,
            TrackEvent {
                r#type: Some(TYPE_COUNTER),
                track_uuid: Some(uuid),
                double_counter_value: Some(c.value),
                ..Default::default()
            },
            None,
        )
    }

    /// Writes one sample as a `PerfSample` packet, interning its frames,
    /// mappings, function names, build ids and the call stack.
    pub fn sample(&mut self, s: &SampleRecord) -> Result<()> {
        self.close_until(s.timestamp)?;
        self.maybe_reset()?;
        self.thread_track(&s.guid, s.pid, s.tid, None)?;
        let mut inter = InternedData::default();
        let cs_iid = match s.stack_id {
            None => None,
            Some(id) => Some(match self.callstacks.get(&(s.guid.clone(), id)) {
                Some(i) => *i,
                None => {
                    let mut frame_ids = Vec::with_capacity(s.frames.len());
                    for f in s.frames.iter().rev() {
                        frame_ids.push(self.intern_frame(&s.guid, f, &mut inter));
                    }
                    let i = self.iid();
                    inter.callstacks.push(Callstack {
                        iid: Some(i),
                        frame_ids,
                    });
                    self.callstacks.insert((s.guid.clone(), id), i);
                    i
                }
            }),
        };
        self.stats.samples += 1;
        self.stats.events += 1;
        let has = !(inter.callstacks.is_empty() && inter.frames.is_empty());
        let ts = self.ts(&s.guid, s.timestamp);
        self.emit(&TracePacket {
            timestamp: Some(ts),
            trusted_packet_sequence_id: Some(SEQ),
            sequence_flags: Some(SEQ_NEEDS_INCREMENTAL_STATE),
            interned_data: has.then_some(inter),
            perf_sample: Some(PerfSample {
                cpu: None,
                pid: Some(s.pid as u32),
                tid: Some(s.tid as u32),
                callstack_iid: cs_iid,
            }),
            ..Default::default()
        })
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
/// are merged in time order from three ordered queries.
pub fn write_perfetto<W: Write>(p: &Profile, out: W) -> Result<PerfettoStats> {
    let procs = source::processes(p)?;
    let shifts = source::clock_shifts(&procs);
    let base = procs
        .iter()
        .filter_map(|q| q.start)
        .min()
        .unwrap_or(0)
        .max(0) as u64;
    let mut w = PerfettoWriter::new(out, shifts, source::modules(p)?, base)?;
    for pr in &procs {
        w.process(pr)?;
    }
    for t in p.threads()? {
        w.thread(&t?)?;
    }
    let mut regions = source::regions(p)?.peekable();
    let mut samples = p.samples()?.peekable();
    let mut counters = source::counters(p)?.peekable();
    loop {
        let tr = match regions.peek() {
            Some(Ok(r)) => Some(r.start),
            Some(Err(_)) => {
                return Err(regions
                    .next()
                    .and_then(|r| r.err())
                    .expect("peeked error")
                    .into())
            }
            None => None,
        };
        let ts = match samples.peek() {
            Some(Ok(s)) => Some(s.timestamp),
            Some(Err(_)) => {
                return Err(samples
                    .next()
                    .and_then(|r| r.err())
                    .expect("peeked error")
                    .into())
            }
            None => None,
        };
        let tc = match counters.peek() {
            Some(Ok(c)) => Some(c.timestamp),
            Some(Err(_)) => {
                return Err(counters
                    .next()
                    .and_then(|r| r.err())
                    .expect("peeked error")
                    .into())
            }
            None => None,
        };
        let min = [tr, ts, tc].into_iter().flatten().min();
        let Some(min) = min else { break };
        if tr == Some(min) {
            if let Some(Ok(r)) = regions.next() {
                w.region(&r)?;
            }
        } else if ts == Some(min) {
            if let Some(Ok(s)) = samples.next() {
                w.sample(&s)?;
            }
        } else if let Some(Ok(c)) = counters.next() {
            w.counter(&c)?;
        }
    }
    Ok(w.finish()?.0)
}
