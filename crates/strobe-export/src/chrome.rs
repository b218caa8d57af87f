//! Chrome trace-event JSON output (`.json`).
//!
//! Owns [`write_chrome`]: a streamed `{"traceEvents":[…]}` document with
//! process/thread name metadata (`M`), regions as complete events (`X`,
//! in start order; regions that overlap without nesting go to extra lanes
//! of their thread, since the format requires nesting), instant markers
//! (`i`), counters (`C`), typed arguments, messages between processes as
//! flows (`s` inside the region with a `flow_out` key, `f` bound to the
//! enclosing region with the same `flow_in` key, as in the Perfetto
//! export), and each thread's samples of the profile's time kind as a
//! Chrome CPU profile (`crate::cpu_profile`), loadable by
//! chrome://tracing, the Perfetto UI and speedscope. It reads the profile
//! as one sink of [`Profile::visit`]. Each event is written straight to the
//! output by the crate's JSON writer (`jsonw`; no JSON tree per event).
//! It holds only open regions and stacks and bounded caches of stacks'
//! frame names, and never reads anything but the profile it is given.

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

use strobe_db::visit::{
    CounterRow, Order, ProfileSink, RegionRow, ResolvedFrame, Run, SampleEvent, SampleKind, Shift,
    Stacks, Stream, ThreadRecord,
};
use strobe_db::Profile;

use crate::cpu_profile::{CpuProfiles, EventSink};
use crate::error::{ExportError, Result};
use crate::jsonw;

/// What a Chrome JSON conversion wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChromeStats {
    /// Metadata events (process and thread names).
    pub metadata: u64,
    /// Complete (`X`) events, one per region.
    pub regions: u64,
    /// Instant (`i`) events, one per marker.
    pub instants: u64,
    /// Counter (`C`) events.
    pub counters: u64,
    /// Samples in the threads' CPU profiles (`(idle)` ones included).
    pub samples: u64,
    /// Nodes of the CPU profiles' call trees.
    pub profile_nodes: u64,
    /// Flow starts (`s`), one per `flow_out` key (a message's send side).
    pub flows_out: u64,
    /// Flow ends (`f`), one per `flow_in` key (its receive side).
    pub flows_in: u64,
}

/// Extra lanes of a thread get synthetic thread ids `tid + k × LANE_STRIDE`
/// (Linux thread ids stay below 2²²), so they never meet a real thread.
const LANE_STRIDE: i64 = 1 << 22;
/// Bytes of events gathered before they go to the writer: as much as a
/// large `BufWriter` holds, so that it passes them on without a copy.
const FLUSH_AT: usize = 1 << 20;
/// Most stacks whose frame names are kept before the cache starts over.
const STACK_NAMES: usize = 65_536;
/// Most distinct frame names kept before the cache starts over.
const FRAME_NAMES: usize = 1 << 20;

/// The nesting lanes of one thread: each lane a stack of open regions'
/// ends.
#[derive(Default)]
struct Lanes(Vec<Vec<i64>>);

impl Lanes {
    /// The first lane where `[start, end]` nests (regions come in start
    /// order); a new lane when none does. Returns the lane and whether it
    /// is new.
    fn place(&mut self, start: i64, end: i64) -> (usize, bool) {
        for (i, open) in self.0.iter_mut().enumerate() {
            while open.last().is_some_and(|&e| e <= start) {
                open.pop();
            }
            if open.last().is_none_or(|&e| e >= end) {
                open.push(end);
                return (i, false);
            }
        }
        self.0.push(vec![end]);
        (self.0.len() - 1, true)
    }
}

/// The document being written: events are appended to a buffer that goes
/// to the writer in large pieces.
struct Events<W: Write> {
    out: W,
    buf: Vec<u8>,
    first: bool,
}

impl<W: Write> EventSink for Events<W> {
    fn event(&mut self) -> &mut Vec<u8> {
        self.begin()
    }

    fn done(&mut self) -> Result<()> {
        self.end()
    }
}

impl<W: Write> Events<W> {
    /// The buffer, positioned for a new event (after its separator).
    fn begin(&mut self) -> &mut Vec<u8> {
        if !self.first {
            self.buf.extend_from_slice(b",\n");
        }
        self.first = false;
        &mut self.buf
    }

    /// Ends an event: hands the buffer to the writer when it is full.
    fn end(&mut self) -> Result<()> {
        if self.buf.len() >= FLUSH_AT {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// A name metadata event (`process_name`, `thread_name`, …) whose
    /// `args.key` is the concatenation of `value`.
    fn metadata(
        &mut self,
        what: &str,
        (pid, tid): (i64, i64),
        key: &str,
        value: &[&str],
    ) -> Result<()> {
        let b = self.begin();
        b.extend_from_slice(br#"{"ph":"M","cat":"__metadata","name":"#);
        jsonw::string(b, what);
        b.extend_from_slice(br#","pid":"#);
        jsonw::int(b, pid);
        b.extend_from_slice(br#","tid":"#);
        jsonw::int(b, tid);
        b.extend_from_slice(br#","args":{"#);
        jsonw::string(b, key);
        b.extend_from_slice(b":\"");
        for piece in value {
            jsonw::string_body(b, piece);
        }
        b.extend_from_slice(b"\"}}");
        self.end()
    }
}

/// A message flow's start (`s`) or end (`f`, bound to the enclosing
/// region) on lane `tid` of process `pid` at `at` ns. The id is the
/// Perfetto export's flow id of the message key, in hex as a string (a
/// JSON number would lose bits in JavaScript viewers); both ends carry
/// the same name and category, by which viewers pair them too.
fn flow<W: Write>(
    ev: &mut Events<W>,
    end: bool,
    (pid, tid): (i64, i64),
    at: i64,
    key: &str,
) -> Result<()> {
    let b = ev.begin();
    b.extend_from_slice(if end {
        br#"{"ph":"f","bp":"e","#
    } else {
        br#"{"ph":"s","#
    });
    b.extend_from_slice(br#""name":"message","cat":"flow","id":"0x"#);
    b.extend_from_slice(format!("{:x}", crate::perfetto::message_flow_id(key)).as_bytes());
    b.extend_from_slice(br#"","pid":"#);
    jsonw::int(b, pid);
    b.extend_from_slice(br#","tid":"#);
    jsonw::int(b, tid);
    b.extend_from_slice(br#","ts":"#);
    jsonw::micros(b, at);
    b.push(b'}');
    ev.end()
}

/// An argument's value as its type says (`int`, `float`, `bool`), else a
/// string.
fn typed(b: &mut Vec<u8>, ty: &str, value: &str) {
    match ty {
        "int" | "int64" | "uint64" | "int32" | "uint32" => {
            if let Ok(v) = value.parse::<i64>() {
                return jsonw::int(b, v);
            }
        }
        "float" | "double" => {
            if let Ok(v) = value.parse::<f64>() {
                return jsonw::float(b, v);
            }
        }
        "bool" => {
            if let Ok(v) = value.parse::<bool>() {
                return b.extend_from_slice(if v { b"true" } else { b"false" });
            }
        }
        _ => {}
    }
    jsonw::string(b, value)
}

/// A region's `args` object: its arguments (strobe's own nesting record
/// `depth` left out, the last of equal names kept) and its correlation id.
fn args(b: &mut Vec<u8>, args: &[(String, String, String)], corr_id: Option<i64>) {
    b.extend_from_slice(br#","args":{"#);
    let mut first = true;
    for (i, (name, ty, value)) in args.iter().enumerate() {
        // `depth` is strobe's own nesting record, not the program's.
        if name == "depth"
            || (corr_id.is_some() && name == "correlation_id")
            || args[i + 1..].iter().any(|(later, _, _)| later == name)
        {
            continue;
        }
        if !first {
            b.push(b',');
        }
        first = false;
        jsonw::string(b, name);
        b.push(b':');
        typed(b, ty, value);
    }
    if let Some(c) = corr_id {
        if !first {
            b.push(b',');
        }
        b.extend_from_slice(br#""correlation_id":"#);
        jsonw::int(b, c);
    }
    b.push(b'}');
}

/// Processes by guid: their index and their time shift, found without
/// hashing while rows keep coming from the same process.
#[derive(Default)]
struct Guids {
    shifts: HashMap<String, Shift>,
    base: i64,
    index: HashMap<Arc<str>, usize>,
    shift: Vec<Shift>,
    last: Option<(Arc<str>, usize)>,
}

impl Guids {
    /// The index of process `guid`.
    fn index(&mut self, guid: &Arc<str>) -> usize {
        if let Some((last, i)) = &self.last {
            if Arc::ptr_eq(last, guid) {
                return *i;
            }
        }
        let i = match self.index.get(guid) {
            Some(&i) => i,
            None => self.insert(guid.clone()),
        };
        self.last = Some((guid.clone(), i));
        i
    }

    /// The index of process `guid`, from its name.
    fn index_str(&mut self, guid: &str) -> usize {
        match self.index.get(guid) {
            Some(&i) => i,
            None => self.insert(guid.into()),
        }
    }

    fn insert(&mut self, guid: Arc<str>) -> usize {
        let i = self.shift.len();
        self.shift
            .push(self.shifts.get(&*guid).copied().unwrap_or_default());
        self.index.insert(guid, i);
        i
    }

    /// `ns` of process `i` on the common time base, relative to the
    /// earliest process start (ns).
    fn at(&self, i: usize, ns: i64) -> i64 {
        (ns + self.shift[i]).saturating_sub(self.base)
    }
}

/// Stacks' frame names (outermost first) by (process index, call site),
/// each name quoted and escaped for JSON once and shared between stacks,
/// so that samples compare and write them without allocating. Bounded:
/// each map starts over when full.
#[derive(Default)]
struct FrameNames {
    stacks: HashMap<(usize, i64), Arc<[Arc<str>]>>,
    names: HashMap<Arc<str>, Arc<str>>,
}

impl FrameNames {
    fn get(
        &mut self,
        stacks: &mut Stacks<'_>,
        (guid, proc): (&Arc<str>, usize),
        id: i64,
    ) -> Result<&Arc<[Arc<str>]>> {
        let key = (proc, id);
        if self.stacks.len() >= STACK_NAMES && !self.stacks.contains_key(&key) {
            self.stacks.clear();
        }
        let names = &mut self.names;
        Ok(match self.stacks.entry(key) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                let frames = stacks.get(guid, id)?;
                e.insert(frames.iter().rev().map(|f| quoted_name(names, f)).collect())
            }
        })
    }
}

/// The quoted JSON name of frame `f`, shared with equal names.
fn quoted_name(names: &mut HashMap<Arc<str>, Arc<str>>, f: &ResolvedFrame) -> Arc<str> {
    let name: Arc<str> = match &f.function {
        Some(function) => function.clone(),
        None => f.display_name().into(),
    };
    if let Some(q) = names.get(&name) {
        return q.clone();
    }
    if names.len() >= FRAME_NAMES {
        names.clear();
    }
    let q = jsonw::quoted(&name);
    names.insert(name, q.clone());
    q
}

/// Converts a profile to Chrome trace JSON on `out`. Timestamps are
/// microseconds on the common time base (see
/// [`strobe_db::visit::clock_shifts`]), relative to the earliest process
/// start, written as exact decimals of the nanosecond times.
pub fn write_chrome<W: Write>(p: &Profile, out: W) -> Result<ChromeStats> {
    let mut sink = Chrome {
        ev: Events {
            out,
            buf: Vec::with_capacity(FLUSH_AT + 4096),
            first: true,
        },
        guids: Guids::default(),
        st: ChromeStats::default(),
        thread_names: HashMap::new(),
        lanes: HashMap::new(),
        time_kind: SampleKind::Cpu,
        frame_names: FrameNames::default(),
        profiles: CpuProfiles::default(),
    };
    sink.ev
        .buf
        .extend_from_slice(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
    p.visit(&mut sink)?;
    let Chrome { mut ev, st, .. } = sink;
    ev.buf.extend_from_slice(b"\n]}\n");
    ev.out.write_all(&ev.buf)?;
    ev.out.flush()?;
    Ok(st)
}

/// The Chrome JSON writer as a sink of the profile: regions first (the
/// samples' readers scan and sort meanwhile), then samples, then counters.
struct Chrome<W: Write> {
    ev: Events<W>,
    guids: Guids,
    st: ChromeStats,
    thread_names: HashMap<(i64, i64), String>,
    lanes: HashMap<(i64, i64), Lanes>,
    time_kind: SampleKind,
    frame_names: FrameNames,
    profiles: CpuProfiles,
}

impl<W: Write> Chrome<W> {
    /// `<thread> (what)`, the name of one of a thread's lanes.
    fn lane_name(&self, pid: i64, tid: i64, what: &str) -> String {
        let base = match self.thread_names.get(&(pid, tid)) {
            Some(name) => name.clone(),
            None => format!("thread {tid}"),
        };
        format!("{base} ({what})")
    }
}

impl<W: Write> ProfileSink for Chrome<W> {
    type Error = ExportError;

    fn order(&self) -> Order {
        Order::Sequence(&[Stream::Regions, Stream::Samples, Stream::Counters])
    }

    fn begin(&mut self, run: &Run) -> Result<()> {
        self.guids.shifts = run.shifts.clone();
        self.guids.base = run
            .processes
            .iter()
            .filter_map(|q| q.start)
            .min()
            .unwrap_or(0);
        self.time_kind = run.time_kind;
        for pr in &run.processes {
            let ev = &mut self.ev;
            ev.metadata("process_name", (pr.pid, 0), "name", &[&pr.short_name()])?;
            ev.metadata("process_labels", (pr.pid, 0), "labels", &[&pr.command])?;
            self.st.metadata += 2;
        }
        Ok(())
    }

    fn thread(&mut self, th: &ThreadRecord) -> Result<()> {
        let name = th
            .name
            .clone()
            .unwrap_or_else(|| format!("thread {}", th.tid));
        self.ev
            .metadata("thread_name", (th.pid, th.tid), "name", &[&name])?;
        self.thread_names.insert((th.pid, th.tid), name);
        self.st.metadata += 1;
        Ok(())
    }

    fn region(&mut self, r: &RegionRow) -> Result<()> {
        let proc = self.guids.index(&r.guid);
        let at = self.guids.at(proc, r.start);
        let cat = r.category.as_deref().unwrap_or("region");
        let marker = r.is_marker();
        let tid = if marker {
            r.tid
        } else {
            let (lane, new) = self
                .lanes
                .entry((r.pid, r.tid))
                .or_default()
                .place(r.start, r.end);
            let tid = r.tid + lane as i64 * LANE_STRIDE;
            if new && lane > 0 {
                let name = self.lane_name(r.pid, r.tid, &format!("overlapping {lane}"));
                self.ev
                    .metadata("thread_name", (r.pid, tid), "name", &[&name])?;
                self.st.metadata += 1;
            }
            tid
        };
        let (ev, st) = (&mut self.ev, &mut self.st);
        let b = ev.begin();
        b.extend_from_slice(if marker {
            br#"{"ph":"i","s":"t","name":"#
        } else {
            br#"{"ph":"X","name":"#
        });
        jsonw::string(b, &r.name);
        b.extend_from_slice(br#","cat":"#);
        jsonw::string(b, cat);
        b.extend_from_slice(br#","pid":"#);
        jsonw::int(b, r.pid);
        b.extend_from_slice(br#","tid":"#);
        jsonw::int(b, tid);
        b.extend_from_slice(br#","ts":"#);
        jsonw::micros(b, at);
        if !marker {
            b.extend_from_slice(br#","dur":"#);
            jsonw::micros(b, r.end.saturating_sub(r.start));
        }
        args(b, &r.args, r.corr_id);
        b.push(b'}');
        ev.end()?;
        if marker {
            st.instants += 1;
        } else {
            st.regions += 1;
        }
        // Inside the region, a nanosecond from its edges where it has
        // room: a viewer binds a flow to the slice open at its time.
        let dur = r.end.saturating_sub(r.start).max(0);
        let inset = i64::from(dur >= 2);
        for (name, _, value) in &r.args {
            match name.as_str() {
                "flow_out" => {
                    flow(ev, false, (r.pid, tid), at + inset, value)?;
                    st.flows_out += 1;
                }
                "flow_in" => {
                    flow(ev, true, (r.pid, tid), at + dur - inset, value)?;
                    st.flows_in += 1;
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn sample(&mut self, s: &SampleEvent<'_>, stacks: &mut Stacks<'_>) -> Result<()> {
        if s.kind != self.time_kind {
            return Ok(());
        }
        let proc = self.guids.index(s.guid);
        let at = self.guids.at(proc, s.timestamp);
        let stack = s.stack_id.map(|id| (proc, id));
        let frame_names = &mut self.frame_names;
        let names = || -> Result<Arc<[Arc<str>]>> {
            let id = s.stack_id.unwrap_or_default();
            Ok(frame_names.get(stacks, (s.guid, proc), id)?.clone())
        };
        let weight = s.weight_ns.min(i64::MAX as u64) as i64;
        self.profiles
            .sample(&mut self.ev, (s.pid, s.tid), stack, names, at, weight)
    }

    fn stream_end(&mut self, stream: Stream) -> Result<()> {
        if stream == Stream::Samples {
            let written = std::mem::take(&mut self.profiles).finish(&mut self.ev)?;
            self.st.samples = written.samples;
            self.st.profile_nodes = written.nodes;
        }
        Ok(())
    }

    fn counter(&mut self, c: &CounterRow) -> Result<()> {
        let proc = self.guids.index_str(&c.guid);
        let at = self.guids.at(proc, c.timestamp);
        let ev = &mut self.ev;
        let b = ev.begin();
        b.extend_from_slice(br#"{"ph":"C","name":""#);
        jsonw::string_body(b, &c.name);
        if let Some(tid) = c.tid {
            b.extend_from_slice(b" (tid ");
            jsonw::int(b, tid);
            b.push(b')');
        }
        b.extend_from_slice(br#"","pid":"#);
        jsonw::int(b, c.pid);
        b.extend_from_slice(br#","ts":"#);
        jsonw::micros(b, at);
        b.extend_from_slice(br#","args":{"#);
        jsonw::string(
            b,
            c.units
                .as_deref()
                .filter(|u| !u.is_empty())
                .unwrap_or("value"),
        );
        b.push(b':');
        jsonw::float(b, c.value);
        b.extend_from_slice(b"}}");
        ev.end()?;
        self.st.counters += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;
    use strobe_db::{
        Arg, CounterInfo, FrameSymbols, ModuleRow, ProcessInfo, Region, SampleMeta, StackFrame,
        ThreadInfo, Writer, WriterOptions,
    };

    use super::*;

    /// Quote, backslash, control characters and non-ASCII.
    const ODD: &str = "q\"uo\\te\t\n\r\u{1}\u{1f}\u{7f} ünï – 𝄞 🦀";
    /// The process start, the base of the timestamps (ns).
    const START: u64 = 5_000_000;

    /// A database whose every name is `ODD`-like, with a region at
    /// 1234.567 µs, a marker, a counter and samples of two stacks.
    fn odd_profile(dir: &std::path::Path) -> Profile {
        let path = dir.join("odd.db");
        let info = ProcessInfo {
            pid: 7,
            ppid: 1,
            init_ns: START,
            start_ns: START,
            start_unix_ns: 1_763_000_000_000_000_000,
            command: format!("/bin/{ODD} --flag"),
            environment: vec![],
        };
        let mut w = Writer::create(&path, &info, WriterOptions::default()).unwrap();
        let t = w
            .add_thread(&ThreadInfo {
                tid: 7,
                name: Some(ODD),
                start_ns: Some(START),
            })
            .unwrap();
        let name = w.intern_string(ODD).unwrap();
        let cat = w.intern_string("c\"at\\").unwrap();
        let args = [
            Arg {
                name: ODD,
                ty: "str",
                value: ODD,
            },
            Arg {
                name: "n",
                ty: "int",
                value: "-42",
            },
            Arg {
                name: "x",
                ty: "double",
                value: "0.25",
            },
            Arg {
                name: "b",
                ty: "bool",
                value: "true",
            },
            Arg {
                name: "not_an_int",
                ty: "int",
                value: "1.5e",
            },
            Arg {
                name: "depth",
                ty: "int",
                value: "3",
            },
        ];
        for (start, end) in [(1_234_567, 1_235_568), (1_300_000, 1_300_000)] {
            w.append_region(&Region {
                thread: t,
                start_ns: START + start,
                end_ns: START + end,
                name,
                category: Some(cat),
                stack: None,
                correlation_id: Some(9),
                args: &args,
            })
            .unwrap();
        }
        let module = w
            .add_module(&ModuleRow {
                path: "/lib/libodd.so",
                build_id: None,
                load_address: 0x10_0000,
                size: 0x1000,
                file_offset: 0,
                load_ns: Some(START),
            })
            .unwrap();
        let frame = |rel_pc| StackFrame {
            module: Some(module),
            rel_pc,
        };
        let (outer, inner) = (
            w.intern_frame(frame(0x100)).unwrap(),
            w.intern_frame(frame(0x200)).unwrap(),
        );
        let inner_name = format!("inner<{ODD}>");
        w.set_frame_symbols(&[
            FrameSymbols {
                frame: outer,
                function: Some(ODD),
                file: None,
                line: None,
            },
            FrameSymbols {
                frame: inner,
                function: Some(&inner_name),
                file: None,
                line: None,
            },
        ])
        .unwrap();
        let track = w.add_track(Some(t), "samples").unwrap();
        // Leaf first: outer+inner, outer+inner, outer alone (unsymbolized 0x300).
        let stacks = [
            vec![frame(0x200), frame(0x100)],
            vec![frame(0x200), frame(0x100)],
            vec![frame(0x300), frame(0x100)],
        ];
        for (k, stack) in stacks.iter().enumerate() {
            let at = START + 2_000_000 + k as u64 * 1_000_001;
            w.append_sample(track, SampleMeta::cpu(at, 1_000_001), stack)
                .unwrap();
        }
        let ctr = w
            .add_counter(&CounterInfo {
                name: ODD,
                description: None,
                units: Some("b\"ytes"),
                component: None,
                accumulating: false,
                expression: None,
            })
            .unwrap();
        w.append_counter_sample(ctr, None, START + 1_500_000, 0.1)
            .unwrap();
        w.finish(START + 10_000_000).unwrap();
        Profile::open_files(&[path]).unwrap()
    }

    #[test]
    fn odd_strings_round_trip_and_timestamps_keep_nanoseconds() {
        let dir = tempfile::tempdir().unwrap();
        let p = odd_profile(dir.path());
        let mut out = Vec::new();
        let st = write_chrome(&p, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let v: Value = serde_json::from_str(&text).expect("valid JSON");
        let events = v["traceEvents"].as_array().unwrap();
        let find = |ph: &str, cat: &str| {
            events
                .iter()
                .find(|e| e["ph"] == ph && e["cat"] == cat)
                .unwrap_or_else(|| panic!("no {ph} {cat} in {text}"))
        };
        let region = find("X", "c\"at\\");
        assert_eq!(region["name"], ODD);
        assert_eq!(region["ts"].as_f64(), Some(1234.567));
        assert_eq!(region["dur"].as_f64(), Some(1.001));
        assert!(text.contains(r#""ts":1234.567,"dur":1.001,"#), "{text}");
        let args = &region["args"];
        assert_eq!(args[ODD], ODD);
        assert_eq!(args["n"], -42);
        assert_eq!(args["x"], 0.25);
        assert_eq!(args["b"], true);
        assert_eq!(args["not_an_int"], "1.5e");
        assert_eq!(args["correlation_id"], 9);
        assert!(args.get("depth").is_none());
        assert_eq!(args.as_object().unwrap().len(), 6);
        let marker = find("i", "c\"at\\");
        assert_eq!(marker["name"], ODD);
        assert_eq!(marker["ts"].as_f64(), Some(1300.0));
        assert_eq!(marker["s"], "t");
        let counter = events.iter().find(|e| e["ph"] == "C").unwrap();
        assert_eq!(counter["name"], ODD);
        assert_eq!(counter["ts"].as_f64(), Some(1500.0));
        assert_eq!(counter["args"]["b\"ytes"], 0.1);
        let names: Vec<(&str, &str)> = events
            .iter()
            .filter(|e| e["ph"] == "M")
            .map(|e| {
                (
                    e["name"].as_str().unwrap(),
                    e["args"]["name"].as_str().unwrap_or(""),
                )
            })
            .collect();
        assert!(names.contains(&("thread_name", ODD)), "{names:?}");
        assert!(events
            .iter()
            .filter(|e| e["ph"] == "M")
            .all(|e| e["cat"] == "__metadata"));
        // The samples: one CPU profile of thread 7, whose call tree has
        // the outer frame, the inner one and the unsymbolized leaf under
        // it, and `(idle)` where the last sample's time runs out.
        let profile = events.iter().find(|e| e["name"] == "Profile").unwrap();
        assert_eq!(profile["ph"], "P");
        assert_eq!(
            (profile["pid"].as_i64(), profile["tid"].as_i64()),
            (Some(7), Some(7))
        );
        assert_eq!(profile["args"]["data"]["startTime"], 2000);
        let chunks: Vec<&Value> = events
            .iter()
            .filter(|e| e["name"] == "ProfileChunk")
            .collect();
        assert_eq!(chunks.len(), 1);
        assert_eq!(chunks[0]["id"], profile["id"]);
        let data = &chunks[0]["args"]["data"];
        let nodes: Vec<(i64, Option<i64>, &str)> = data["cpuProfile"]["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| {
                (
                    n["id"].as_i64().unwrap(),
                    n["parent"].as_i64(),
                    n["callFrame"]["functionName"].as_str().unwrap(),
                )
            })
            .collect();
        let inner_name = format!("inner<{ODD}>");
        assert_eq!(
            nodes,
            vec![
                (1, None, ODD),
                (2, Some(1), inner_name.as_str()),
                (3, Some(1), "libodd.so+0x300"),
                (4, None, "(idle)"),
            ]
        );
        assert_eq!(
            data["cpuProfile"]["samples"],
            serde_json::json!([2, 2, 3, 4])
        );
        assert_eq!(data["timeDeltas"], serde_json::json!([0, 1000, 1000, 1000]));
        assert_eq!(data["endTime"], 5000);
        assert_eq!(
            st,
            ChromeStats {
                metadata: 3,
                regions: 1,
                instants: 1,
                counters: 1,
                samples: 4,
                profile_nodes: 4,
                ..Default::default()
            }
        );
    }
}
