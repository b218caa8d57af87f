//! Firefox Profiler output (processed profile JSON, version 55), written
//! in one streaming pass with bounded memory.
//!
//! Owns [`write_firefox`]: one Firefox process per profiled process, one
//! thread per thread with its on-CPU samples (stacks as labelled frames,
//! outermost first, each weighted by the time it stands for: weight type
//! `tracing-ms`), its off-CPU samples as `off-CPU` interval markers over
//! the blocked time (with the stack where the thread blocked) and its
//! regions as interval markers (instants for zero-length regions), in the
//! format profiler.firefox.com loads with "Load a profile from file". The
//! JSON is the one `fxprof-processed-profile` 0.8.1 writes for the same
//! profile, byte for byte, but the per-row columns (samples, markers,
//! strings) are formatted as the time-ordered inputs arrive and kept in a
//! spool (`crate::spool`: memory up to a budget, then one anonymous
//! temporary file), then copied into the document thread by thread; only
//! the tables that grow with distinct stacks and frames stay in memory.
//! The parts: the pass over the profile (`sink`), a thread's tables and
//! columns (`thread`), the document's layout (`document`) and its JSON
//! values (`json`). It never holds a trace, never formats a row through
//! `serde_json::Value` and never opens a named file.

mod document;
mod json;
mod sink;
mod thread;

use std::io::{BufWriter, Write};

use strobe_db::Profile;

use crate::error::Result;
use sink::{Fx, Limits};

pub use sink::FirefoxStats;

/// Converts a profile to the Firefox Profiler's processed format.
pub fn write_firefox<W: Write>(p: &Profile, out: W) -> Result<FirefoxStats> {
    write_with(p, out, Limits::default())
}

/// [`write_firefox`] within `limits`.
fn write_with<W: Write>(p: &Profile, out: W, limits: Limits) -> Result<FirefoxStats> {
    let mut fx = Fx::new(limits);
    p.visit(&mut fx)?;
    let interval = fx.period as u64 as f64 / 1_000_000_000.0 * 1000.0;
    let product = std::mem::take(&mut fx.product);
    let mut out = BufWriter::with_capacity(256 << 10, out);
    document::write_document(&mut fx, &product, interval, &mut out)?;
    out.flush()?;
    Ok(fx.st)
}

/// The crate's test databases (shared with the `tests` directory).
#[cfg(test)]
#[path = "../../tests/fixture/mod.rs"]
mod fixture;

#[cfg(test)]
mod tests {
    use super::*;

    /// The profile of ten processes (two nodes), as `limits` write it.
    fn convert(p: &Profile, limits: Limits) -> (FirefoxStats, Vec<u8>) {
        let mut out = Vec::new();
        let st = write_with(p, &mut out, limits).unwrap();
        (st, out)
    }

    fn ten_processes(dir: &std::path::Path) -> Profile {
        let files: Vec<_> = (0..10u32)
            .map(|k| {
                let f = dir.join(format!("app-{k}.db"));
                let node = if k < 7 { "node-a" } else { "node-b" };
                fixture::write_process(&f, 1000 + k, node, 4 + u64::from(k), 6);
                f
            })
            .collect();
        Profile::open_files(&files).unwrap()
    }

    #[test]
    fn spilled_columns_give_the_same_document() {
        let dir = tempfile::tempdir().unwrap();
        let p = ten_processes(dir.path());
        let (st, whole) = convert(&p, Limits::default());
        assert!(st.samples > 0 && st.markers > 0 && st.off_cpu_markers > 0);
        assert!(st.threads >= 20);
        // A few bytes per chunk: every column spills, one value at a
        // time; and a budget that spills them all again and again.
        for (chunk, budget) in [(1, usize::MAX), (64, 512), (1 << 20, 256)] {
            let limits = Limits {
                chunk,
                budget,
                ..Limits::default()
            };
            let (st2, spilled) = convert(&p, limits);
            assert_eq!(st2, st);
            assert!(
                spilled == whole,
                "chunk {chunk}, budget {budget}: the documents differ"
            );
        }
        let v: serde_json::Value = serde_json::from_slice(&whole).unwrap();
        let threads = v["threads"].as_array().unwrap();
        assert_eq!(threads.len() as u64, st.threads);
    }

    /// Every string a thread's tables point to, resolved, in table order.
    fn resolved(v: &serde_json::Value) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        for t in v["threads"].as_array().unwrap() {
            let strings = t["stringArray"].as_array().unwrap();
            let s = |i: &serde_json::Value| {
                strings[i.as_u64().unwrap() as usize]
                    .as_str()
                    .unwrap()
                    .to_string()
            };
            let mut r: Vec<String> = t["funcTable"]["name"]
                .as_array()
                .unwrap()
                .iter()
                .map(s)
                .collect();
            r.extend(t["markers"]["name"].as_array().unwrap().iter().map(s));
            for d in t["markers"]["data"].as_array().unwrap() {
                r.push(s(d.get("args").or_else(|| d.get("function")).unwrap()));
            }
            out.push(r);
        }
        out
    }

    #[test]
    fn forgotten_string_indexes_only_repeat_strings() {
        let dir = tempfile::tempdir().unwrap();
        let p = ten_processes(dir.path());
        let (st, whole) = convert(&p, Limits::default());
        let limits = Limits {
            strings: 0,
            ..Limits::default()
        };
        let (st2, small) = convert(&p, limits);
        assert_eq!(st2, st);
        assert!(small.len() > whole.len(), "strings are written again");
        let a: serde_json::Value = serde_json::from_slice(&whole).unwrap();
        let b: serde_json::Value = serde_json::from_slice(&small).unwrap();
        assert_eq!(resolved(&a), resolved(&b));
        // The frame and stack tables do not grow with repeats.
        for (x, y) in a["threads"]
            .as_array()
            .unwrap()
            .iter()
            .zip(b["threads"].as_array().unwrap())
        {
            assert_eq!(x["stackTable"], y["stackTable"]);
            assert_eq!(x["frameTable"]["length"], y["frameTable"]["length"]);
            assert_eq!(x["samples"], y["samples"]);
        }
    }
}
