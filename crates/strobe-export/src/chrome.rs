//! Chrome trace-event JSON output (`.json`).
//!
//! Owns [`write_chrome`]: a streamed `{"traceEvents":[…]}` document with
//! process/thread name metadata (`M`), regions as complete events (`X`,
//! in start order; regions that overlap without nesting go to extra lanes
//! of their thread, since the format requires nesting), instant markers
//! (`i`), counters (`C`), typed arguments, and each thread's CPU samples as
//! a flame chart (nested `X` events of the sampled stacks on a lane of
//! their own), loadable by chrome://tracing, the Perfetto UI and
//! speedscope. It writes one event at a time and holds only open regions
//! and stacks; it never reads anything but the profile it is given.

use std::io::Write;

use serde_json::{json, Map, Value};
use strobe_db::Profile;

use crate::error::Result;
use crate::source;

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
    /// Complete (`X`) events of sampled stack frames.
    pub sample_frames: u64,
}

/// Extra lanes of a thread get synthetic thread ids `tid + k × LANE_STRIDE`
/// (Linux thread ids stay below 2²²), so they never meet a real thread.
const LANE_STRIDE: i64 = 1 << 22;
/// The lane of a thread's sampled stacks.
const SAMPLE_LANE: i64 = 511;

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

/// An argument's value as its type says (`int`, `float`, `bool`), else a
/// string.
fn typed(ty: &str, value: &str) -> Value {
    let parsed = match ty {
        "int" | "int64" | "uint64" | "int32" | "uint32" => {
            value.parse::<i64>().ok().map(Value::from)
        }
        "float" | "double" => value.parse::<f64>().ok().map(Value::from),
        "bool" => value.parse::<bool>().ok().map(Value::from),
        _ => None,
    };
    parsed.unwrap_or_else(|| Value::String(value.to_string()))
}

struct Events<W: Write> {
    out: W,
    first: bool,
}

impl<W: Write> Events<W> {
    fn push(&mut self, v: &Value) -> Result<()> {
        if !self.first {
            self.out.write_all(b",\n")?;
        }
        self.first = false;
        serde_json::to_writer(&mut self.out, v)?;
        Ok(())
    }
}

/// One thread's sampled stacks as a flame chart: the frames open since
/// an earlier sample (outermost first, with their start), and when the
/// last sample's time ends.
#[derive(Default)]
struct Flame {
    open: Vec<(String, f64)>,
    end: f64,
}

impl Flame {
    /// A sample with `names` (outermost first) at `at` µs: frames it no
    /// longer has end there (as `X` events), new ones begin. Returns the
    /// events written.
    fn step<W: Write>(
        &mut self,
        ev: &mut Events<W>,
        (pid, tid): (i64, i64),
        names: &[String],
        at: f64,
    ) -> Result<u64> {
        let shared = self
            .open
            .iter()
            .zip(names)
            .take_while(|((open, _), name)| open == *name)
            .count();
        let mut written = 0;
        while self.open.len() > shared {
            let Some((name, start)) = self.open.pop() else {
                break;
            };
            ev.push(&json!({"ph":"X","name":name,"cat":"sample","pid":pid,
                "tid":tid + SAMPLE_LANE * LANE_STRIDE,"ts":start,"dur":(at - start).max(0.0)}))?;
            written += 1;
        }
        self.open
            .extend(names[shared..].iter().map(|n| (n.clone(), at)));
        Ok(written)
    }
}

/// Microseconds (Chrome's unit) from nanoseconds, keeping ns precision.
fn us(ns: i64) -> f64 {
    ns as f64 / 1000.0
}

/// Converts a profile to Chrome trace JSON on `out`. Timestamps are
/// microseconds on the common time base (see
/// [`crate::source::clock_shifts`]), relative to the earliest process start
/// so that the values stay exact in a double.
pub fn write_chrome<W: Write>(p: &Profile, out: W) -> Result<ChromeStats> {
    let procs = source::processes(p)?;
    let shifts = source::clock_shifts(&procs);
    let base = procs.iter().filter_map(|q| q.start).min().unwrap_or(0);
    let t = |guid: &str, ns: i64| us(ns + shifts.get(guid).copied().unwrap_or(0) - base);
    let mut ev = Events { out, first: true };
    let mut st = ChromeStats::default();
    ev.out
        .write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
    for pr in &procs {
        ev.push(&json!({"ph":"M","name":"process_name","pid":pr.pid,"tid":0,
            "args":{"name": pr.short_name()}}))?;
        ev.push(
            &json!({"ph":"M","name":"process_labels","pid":pr.pid,"tid":0,
            "args":{"labels": pr.command}}),
        )?;
        st.metadata += 2;
    }
    let mut thread_names: std::collections::HashMap<(i64, i64), String> = Default::default();
    for th in p.threads()? {
        let th = th?;
        let name = th
            .name
            .clone()
            .unwrap_or_else(|| format!("thread {}", th.tid));
        ev.push(
            &json!({"ph":"M","name":"thread_name","pid":th.pid,"tid":th.tid,"args":{"name":&name}}),
        )?;
        thread_names.insert((th.pid, th.tid), name);
        st.metadata += 1;
    }
    let lane_name =
        |names: &std::collections::HashMap<(i64, i64), String>, pid, tid, what: &str| {
            let base = names
                .get(&(pid, tid))
                .cloned()
                .unwrap_or_else(|| format!("thread {tid}"));
            format!("{base} ({what})")
        };
    let mut lanes: std::collections::HashMap<(i64, i64), Lanes> = Default::default();
    for r in source::regions(p)? {
        let r = r?;
        let mut args = Map::new();
        // `depth` is strobe's own nesting record, not the program's.
        for (n, ty, v) in r.args.iter().filter(|(n, _, _)| n != "depth") {
            args.insert(n.clone(), typed(ty, v));
        }
        if let Some(c) = r.corr_id {
            args.insert("correlation_id".into(), json!(c));
        }
        let cat = r.category.as_deref().unwrap_or("region");
        if r.is_marker() {
            ev.push(
                &json!({"ph":"i","s":"t","name":&*r.name,"cat":cat,"pid":r.pid,"tid":r.tid,
                "ts":t(&r.guid, r.start),"args":args}),
            )?;
            st.instants += 1;
        } else {
            let (lane, new) = lanes
                .entry((r.pid, r.tid))
                .or_default()
                .place(r.start, r.end);
            let tid = r.tid + lane as i64 * LANE_STRIDE;
            if new && lane > 0 {
                let name = lane_name(&thread_names, r.pid, r.tid, &format!("overlapping {lane}"));
                ev.push(&json!({"ph":"M","name":"thread_name","pid":r.pid,"tid":tid,"args":{"name":name}}))?;
                st.metadata += 1;
            }
            ev.push(
                &json!({"ph":"X","name":&*r.name,"cat":cat,"pid":r.pid,"tid":tid,
                "ts":t(&r.guid, r.start),"dur":us(r.end - r.start),"args":args}),
            )?;
            st.regions += 1;
        }
    }
    let time_kind = strobe_db::summary::time_kind(p)?.category();
    let mut flames: std::collections::HashMap<(i64, i64), Flame> = Default::default();
    for s in p.samples()? {
        let s = s?;
        if s.kind != time_kind {
            continue;
        }
        let key = (s.pid, s.tid);
        if !flames.contains_key(&key) {
            let name = lane_name(&thread_names, s.pid, s.tid, "samples");
            let tid = s.tid + SAMPLE_LANE * LANE_STRIDE;
            ev.push(
                &json!({"ph":"M","name":"thread_name","pid":s.pid,"tid":tid,"args":{"name":name}}),
            )?;
            st.metadata += 1;
        }
        let flame = flames.entry(key).or_default();
        let at = t(&s.guid, s.timestamp);
        let names: Vec<String> = s.frames.iter().rev().map(source::frame_name).collect();
        st.sample_frames += flame.step(&mut ev, key, &names, at)?;
        flame.end = at + us(s.weight_ns.min(i64::MAX as u64) as i64);
    }
    for (key, mut flame) in flames {
        let end = flame.end;
        st.sample_frames += flame.step(&mut ev, key, &[], end)?;
    }
    for c in source::counters(p)? {
        let c = c?;
        let name = match c.tid {
            Some(tid) => format!("{} (tid {tid})", c.name),
            None => c.name.clone(),
        };
        ev.push(&json!({"ph":"C","name":name,"pid":c.pid,"ts":t(&c.guid, c.timestamp),
            "args":{ c.units.clone().filter(|u| !u.is_empty()).unwrap_or_else(|| "value".into()): c.value }}))?;
        st.counters += 1;
    }
    ev.out.write_all(b"\n]}\n")?;
    ev.out.flush()?;
    Ok(st)
}
