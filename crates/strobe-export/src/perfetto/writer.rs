//! The streaming Perfetto encoder.
//!
//! Owns [`PerfettoWriter`]: fed processes, threads, regions, samples and
//! counters in time order, it describes their tracks, turns regions into
//! nested BEGIN/END pairs (overlapping ones on extra lanes of their
//! thread, each END written when its time comes), on-CPU samples into
//! `PerfSample`s, off-CPU samples into `off-CPU: <function>` slices over
//! the blocked time, counters into counter track values, correlation ids
//! into flows within a process and message keys (`flow_out`/`flow_in`
//! region arguments) into flows across processes, and counts what it
//! wrote ([`PerfettoStats`]). Memory stays bounded: it keeps the open
//! regions (with the flows their ENDs end) and off-CPU slices of each
//! thread and the track table; interning is `intern`'s and
//! framing `packets`'s. It never reads a database and never
//! holds the trace.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::io::Write;
use std::sync::Arc;

use strobe_db::visit::{
    CounterRow, ModuleRow, ProcessRow, RegionRow, SampleEvent, Shift, ThreadRecord,
};
use strobe_db::SampleRow;

use super::ids::{
    correlation_flow_id, counter_uuid, lane_uuid, message_flow_id, process_uuid, thread_uuid,
};
use super::intern::Interner;
use super::packets::{Packets, SEQ};
use super::proto::*;
use crate::error::Result;
use crate::{Fast, FastMap};

/// The sequence of the clock snapshot.
const SEQ_CLOCKS: u32 = 2;

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
    packets: Packets<W>,
    stats: PerfettoStats,
    shifts: HashMap<String, Shift>,
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
    /// Whether the sequence must be restarted before the next packet.
    needs_reset: bool,
    /// Interning state of the sequence.
    intern: Interner,
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
            packets: Packets::new(out),
            stats: PerfettoStats::default(),
            shifts,
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
            intern: Interner::new(modules),
            off_cpu_category: Arc::from(strobe_db::SampleKind::OffCpu.category()),
        };
        w.packets.emit(&TracePacket {
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

    /// Clears the interning state and (re)writes the sequence defaults on a
    /// packet flagged "incremental state cleared".
    fn reset_sequence(&mut self) -> Result<()> {
        self.intern.clear();
        self.needs_reset = false;
        self.packets.emit(&TracePacket {
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

    fn shift(&self, guid: &str) -> Shift {
        self.shifts.get(guid).copied().unwrap_or_default()
    }

    fn describe(&mut self, d: TrackDescriptor) -> Result<()> {
        let uuid = d.uuid.unwrap_or(0);
        if self.described.insert(uuid) {
            self.packets.emit(&TracePacket {
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
                None => {
                    self.stats.events += 1;
                    self.packets
                        .track_event(at, TYPE_SLICE_END, uuid, None, None, None, None)?
                }
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
        self.packets.emit(&TracePacket {
            timestamp: Some(ts),
            trusted_packet_sequence_id: Some(SEQ),
            sequence_flags: Some(SEQ_NEEDS_INCREMENTAL_STATE),
            track_event: Some(ev),
            interned_data: interned,
            ..Default::default()
        })
    }

    fn maybe_reset(&mut self) -> Result<()> {
        if self.needs_reset || self.intern.is_full() {
            self.reset_sequence()?;
        }
        Ok(())
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
        let name_iid = self.intern.name(&r.name, &mut inter);
        let cat = r
            .category
            .as_ref()
            .map(|c| self.intern.category(c, &mut inter));
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
            self.stats.events += 1;
            return self.packets.track_event(
                ts,
                ty,
                track,
                Some(name_iid),
                cat,
                None,
                inter.as_ref(),
            );
        }
        let debug_annotations = r.args.iter().map(|(n, t, v)| annotation(n, t, v)).collect();
        let mut flow_ids: Vec<u64> = r
            .corr_id
            .map(|c| correlation_flow_id(&r.guid, c))
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
        let uuid = lane_uuid(&t.guid, t.tid, k);
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
                let uuid = counter_uuid(&c.guid, c.tid, &c.name);
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
        self.stats.events += 1;
        self.packets
            .track_event(ts, TYPE_COUNTER, uuid, None, None, Some(c.value), None)
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
    pub(super) fn sample_in(
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
            Some(id) => match self.intern.callstack(proc, id) {
                Some(i) => Some(i),
                None => return self.new_callstack_sample(&s, ts, proc, id, resolve),
            },
        };
        self.stats.samples += 1;
        self.stats.events += 1;
        self.packets.sample(ts, s.pid as u32, s.tid as u32, cs_iid)
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
        let i = self
            .intern
            .add_callstack(s.guid, proc, id, &frames, &mut inter);
        self.stats.samples += 1;
        self.stats.events += 1;
        self.packets.emit(&TracePacket {
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
            Some(id) => match self.intern.off_cpu_name(proc, id) {
                Some(n) => n,
                None => {
                    let frames = resolve(s.guid, id)?;
                    let n: Arc<str> = Arc::from(off_cpu_slice_name(frames.first()).as_str());
                    self.intern.keep_off_cpu_name(proc, id, n.clone());
                    n
                }
            },
        };
        let mut inter = None;
        let name_iid = self.intern.name(&name, &mut inter);
        let cat = self.intern.category(&self.off_cpu_category, &mut inter);
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
        self.stats.events += 1;
        self.packets.track_event(
            ts,
            TYPE_SLICE_BEGIN,
            track,
            Some(name_iid),
            Some(cat),
            None,
            inter.as_ref(),
        )
    }

    /// Writes the ENDs of every region still open and flushes; returns the
    /// statistics and the output.
    pub fn finish(mut self) -> Result<(PerfettoStats, W)> {
        self.close_until(i64::MAX)?;
        self.stats.packets = self.packets.count();
        let out = self.packets.finish()?;
        Ok((self.stats, out))
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

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

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
        let corr = correlation_flow_id("a", 5);
        assert_eq!(
            events(&out),
            vec![
                (TYPE_SLICE_BEGIN, vec![corr, message_flow_id("7")], vec![]),
                (TYPE_SLICE_END, vec![], vec![message_flow_id("8")]),
                (TYPE_INSTANT, vec![], vec![message_flow_id("9")]),
            ]
        );
    }
}
