//! Chrome trace-event JSON output (`.json`).
//!
//! Owns [`write_chrome`]: a streamed `{"traceEvents":[…]}` document with
//! process/thread name metadata (`M`), regions as complete events (`X`,
//! in start order), instant markers (`i`) and counters (`C`), loadable by
//! chrome://tracing, the Perfetto UI and speedscope. It writes one event at
//! a time and never holds the trace; it never reads anything but the
//! profile it is given.

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
            "args":{"name": format!("{} (pid {})", pr.short_name(), pr.pid)}}))?;
        ev.push(
            &json!({"ph":"M","name":"process_labels","pid":pr.pid,"tid":0,
            "args":{"labels": pr.command}}),
        )?;
        st.metadata += 2;
    }
    for th in p.threads()? {
        let th = th?;
        let name = th
            .name
            .clone()
            .unwrap_or_else(|| format!("thread {}", th.tid));
        ev.push(
            &json!({"ph":"M","name":"thread_name","pid":th.pid,"tid":th.tid,"args":{"name":name}}),
        )?;
        st.metadata += 1;
    }
    for r in source::regions(p)? {
        let r = r?;
        let mut args = Map::new();
        for (n, _, v) in &r.args {
            args.insert(n.clone(), Value::String(v.clone()));
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
            ev.push(
                &json!({"ph":"X","name":&*r.name,"cat":cat,"pid":r.pid,"tid":r.tid,
                "ts":t(&r.guid, r.start),"dur":us(r.end - r.start),"args":args}),
            )?;
            st.regions += 1;
        }
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
