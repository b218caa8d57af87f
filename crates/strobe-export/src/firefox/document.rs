//! The Firefox Profiler document.
//!
//! Owns the document's layout: `meta` (categories, marker schemas,
//! sample units), then every thread (processes by start time and pid; in
//! each, the main thread first) with its in-memory tables written out and
//! its spooled columns copied in, in the key order of the processed
//! profile format (version 55) as `fxprof-processed-profile` writes it.
//! It never reads the profile and never changes what the pass over it
//! ([`Fx`]) gathered, beyond draining its spool.

use std::io::{self, Write};

use super::json::{put_f64, put_ms, put_str, put_u64, repeat, repeat_to, sep};
use super::sink::Fx;
use super::thread::{
    M_DATA, M_END, M_START, R_NAME, R_PHASE, STRINGS, S_CPU, S_STACK, S_TIME, S_WEIGHT,
};

/// Category indexes (meta.categories: Other, Samples, Off-CPU, Regions).
const CAT_SAMPLES: u64 = 1;
const CAT_OFF_CPU: u64 = 2;
const CAT_REGIONS: u64 = 3;

/// The marker schemas (`meta.markerSchema`) of the two marker types.
const OFF_CPU_SCHEMA: &str = r#"{"name":"StrobeOffCpu","display":["marker-chart","marker-table"],"chartLabel":"{marker.data.function}","tooltipLabel":"off-CPU: {marker.data.function}","tableLabel":"off-CPU: {marker.data.function}","description":"Time the thread spent blocked (off CPU), with the stack where it blocked","fields":[{"key":"function","label":"Blocked in","format":"unique-string","searchable":true},{"key":"blocked","label":"Blocked for","format":"milliseconds"}]}"#;
const REGION_SCHEMA: &str = r#"{"name":"StrobeRegion","display":["marker-chart","marker-table"],"chartLabel":"{marker.name}","tooltipLabel":"{marker.name}","tableLabel":"{marker.name} {marker.data.args}","description":"A strobe region (instrumented interval)","fields":[{"key":"args","label":"Arguments","format":"unique-string","searchable":true}]}"#;

/// Writes the document: meta, then each thread (processes by start time
/// and pid; in each, the main thread first, then by start, name and tid)
/// with its in-memory tables and its spooled columns.
pub(super) fn write_document<W: Write>(
    fx: &mut Fx,
    product: &str,
    interval: f64,
    out: &mut W,
) -> io::Result<()> {
    let mut b = Vec::with_capacity(64 << 10);
    b.extend_from_slice(br#"{"meta":{"categories":[{"name":"Other","color":"grey","subcategories":["Other"]},{"name":"Samples","color":"blue","subcategories":["Other"]},{"name":"Off-CPU","color":"grey","subcategories":["Other"]},{"name":"Regions","color":"yellow","subcategories":["Other"]}],"debug":false,"extensions":{"baseURL":[],"id":[],"length":0,"name":[]},"interval":"#);
    put_f64(&mut b, interval);
    b.extend_from_slice(br#","preprocessedProfileVersion":55,"processType":0,"product":"#);
    put_str(&mut b, product);
    b.extend_from_slice(
        r#","sampleUnits":{"eventDelay":"ms","threadCPUDelta":"µs","time":"ms"}"#.as_bytes(),
    );
    b.extend_from_slice(br#","startTime":0.0,"symbolicated":false,"pausedRanges":[],"version":24,"usesOnlyOneStackType":true,"sourceCodeIsNotOnSearchfox":true,"markerSchema":["#);
    let schemas: Vec<&str> = [
        (fx.st.off_cpu_markers > 0, OFF_CPU_SCHEMA),
        (fx.st.markers > 0, REGION_SCHEMA),
    ]
    .into_iter()
    .filter_map(|(used, s)| used.then_some(s))
    .collect();
    b.extend_from_slice(schemas.join(",").as_bytes());
    b.extend_from_slice(br#"]},"libs":[],"threads":["#);
    out.write_all(&b)?;
    let mut order: Vec<usize> = (0..fx.procs.len()).collect();
    order.sort_by(|&x, &y| {
        let (x, y) = (&fx.procs[x], &fx.procs[y]);
        x.start.cmp(&y.start).then_with(|| x.pid.cmp(&y.pid))
    });
    let mut first = true;
    for q in order {
        let mut threads = fx.procs[q].threads.clone();
        threads.sort_by(|&x, &y| {
            let (x, y) = (&fx.threads[x], &fx.threads[y]);
            (!x.is_main)
                .cmp(&!y.is_main)
                .then_with(|| x.start.cmp(&y.start))
                .then_with(|| x.name.cmp(&y.name))
                .then_with(|| x.tid.cmp(&y.tid))
        });
        for t in threads {
            if !first {
                out.write_all(b",")?;
            }
            first = false;
            write_thread(fx, t, &mut b, out)?;
        }
    }
    out.write_all(br#"],"pages":[],"profilerOverhead":[],"counters":[]}"#)
}

/// Writes one thread's object.
fn write_thread<W: Write>(fx: &mut Fx, t: usize, b: &mut Vec<u8>, out: &mut W) -> io::Result<()> {
    let th = &fx.threads[t];
    let q = &fx.procs[th.process];
    let nf = th.func_names.len();
    b.clear();
    b.extend_from_slice(br#"{"frameTable":{"length":"#);
    put_u64(b, nf as u64);
    b.extend_from_slice(br#","address":["#);
    repeat(b, b"-1", nf);
    b.extend_from_slice(br#"],"inlineDepth":["#);
    repeat(b, b"0", nf);
    b.extend_from_slice(br#"],"category":["#);
    repeat(b, CAT_SAMPLES.to_string().as_bytes(), nf);
    b.extend_from_slice(br#"],"subcategory":["#);
    repeat(b, b"0", nf);
    b.extend_from_slice(br#"],"func":["#);
    for i in 0..nf {
        sep(b, i as u64);
        put_u64(b, i as u64);
    }
    b.extend_from_slice(br#"],"nativeSymbol":["#);
    repeat(b, b"null", nf);
    b.extend_from_slice(br#"],"innerWindowID":["#);
    repeat(b, b"0", nf);
    b.extend_from_slice(br#"],"line":["#);
    repeat(b, b"null", nf);
    b.extend_from_slice(br#"],"column":["#);
    repeat(b, b"null", nf);
    b.extend_from_slice(br#"]},"funcTable":{"length":"#);
    put_u64(b, nf as u64);
    b.extend_from_slice(br#","name":["#);
    for (i, n) in th.func_names.iter().enumerate() {
        sep(b, i as u64);
        put_u64(b, u64::from(*n));
    }
    b.extend_from_slice(br#"],"isJS":["#);
    repeat(b, b"false", nf);
    b.extend_from_slice(br#"],"relevantForJS":["#);
    repeat(b, b"false", nf);
    b.extend_from_slice(br#"],"resource":["#);
    repeat(b, b"-1", nf);
    b.extend_from_slice(br#"],"fileName":["#);
    repeat(b, b"null", nf);
    b.extend_from_slice(br#"],"lineNumber":["#);
    repeat(b, b"null", nf);
    b.extend_from_slice(br#"],"columnNumber":["#);
    repeat(b, b"null", nf);
    b.extend_from_slice(br#"]},"markers":{"length":"#);
    let (n_off, n_reg) = (th.off_cpu, th.regions);
    put_u64(b, n_off + n_reg);
    b.extend_from_slice(br#","category":["#);
    out.write_all(b)?;
    b.clear();
    let (cat_off, cat_reg) = (CAT_OFF_CPU.to_string(), CAT_REGIONS.to_string());
    repeat_to(out, b, cat_off.as_bytes(), n_off, 0)?;
    repeat_to(out, b, cat_reg.as_bytes(), n_reg, n_off)?;
    let col = th.col;
    let off_name = th.off_cpu_name.unwrap_or(0).to_string();
    for (key, c, off_value) in [
        ("data", M_DATA, None),
        ("endTime", M_END, None),
        ("name", R_NAME, Some(off_name.as_bytes())),
        ("phase", R_PHASE, Some(&b"1"[..])),
        ("startTime", M_START, None),
    ] {
        b.extend_from_slice(b"],\"");
        b.extend_from_slice(key.as_bytes());
        b.extend_from_slice(b"\":[");
        if let Some(v) = off_value {
            // The off-CPU markers' one value, then the regions' spooled
            // ones.
            repeat_to(out, b, v, n_off, 0)?;
            if n_off > 0 && n_reg > 0 {
                b.push(b',');
            }
        }
        out.write_all(b)?;
        b.clear();
        fx.spool.drain(col + c, out)?;
    }
    b.push(b']');
    let th = &fx.threads[t];
    let q_name = if th.is_main { &q.name } else { &th.name };
    b.extend_from_slice(br#"},"name":"#);
    put_str(b, q_name);
    b.extend_from_slice(br#","isMainThread":"#);
    b.extend_from_slice(if th.is_main { b"true" } else { b"false" });
    b.extend_from_slice(br#","nativeSymbols":{"length":0,"address":[],"functionSize":[],"libIndex":[],"name":[]},"pausedRanges":[],"pid":"#);
    put_str(b, &q.pid);
    b.extend_from_slice(br#","processName":"#);
    put_str(b, &q.name);
    b.extend_from_slice(br#","processShutdownTime":null,"processStartupTime":"#);
    put_ms(b, q.start);
    b.extend_from_slice(br#","processType":"default","registerTime":"#);
    put_ms(b, th.start);
    b.extend_from_slice(br#","resourceTable":{"length":0,"lib":[],"name":[],"host":[],"type":[]},"samples":{"length":"#);
    put_u64(b, th.samples);
    b.extend_from_slice(br#","weightType":"tracing-ms""#);
    for (key, c) in [
        ("stack", S_STACK),
        ("timeDeltas", S_TIME),
        ("weight", S_WEIGHT),
        ("threadCPUDelta", S_CPU),
    ] {
        b.extend_from_slice(b",\"");
        b.extend_from_slice(key.as_bytes());
        b.extend_from_slice(b"\":[");
        out.write_all(b)?;
        b.clear();
        fx.spool.drain(col + c, out)?;
        b.push(b']');
    }
    let th = &fx.threads[t];
    b.extend_from_slice(br#"},"stackTable":{"length":"#);
    put_u64(b, th.stack_rows.len() as u64);
    b.extend_from_slice(br#","prefix":["#);
    for (i, (prefix, _)) in th.stack_rows.iter().enumerate() {
        sep(b, i as u64);
        match prefix {
            Some(p) => put_u64(b, u64::from(*p)),
            None => b.extend_from_slice(b"null"),
        }
    }
    b.extend_from_slice(br#"],"frame":["#);
    for (i, (_, frame)) in th.stack_rows.iter().enumerate() {
        sep(b, i as u64);
        put_u64(b, u64::from(*frame));
    }
    b.extend_from_slice(br#"]},"stringArray":["#);
    out.write_all(b)?;
    b.clear();
    fx.spool.drain(col + STRINGS, out)?;
    let th = &fx.threads[t];
    b.extend_from_slice(br#"],"tid":"#);
    put_str(b, &th.tid);
    b.extend_from_slice(br#","unregisterTime":"#);
    match th.end {
        Some(e) => put_ms(b, e),
        None => b.extend_from_slice(b"null"),
    }
    b.extend_from_slice(br#","showMarkersInTimeline":false}"#);
    out.write_all(b)?;
    b.clear();
    Ok(())
}
