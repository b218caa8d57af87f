//! Firefox Profiler output (processed profile JSON) through
//! `fxprof-processed-profile`.
//!
//! Owns [`write_firefox`]: one Firefox process per profiled process, one
//! thread per thread with its samples (stacks as labelled frames,
//! outermost first) and its regions as interval markers (instants for
//! zero-length regions), in the format profiler.firefox.com loads with
//! "Load a profile from file". The library builds the whole profile in
//! memory before serialising it, so this exporter's memory grows with the
//! data (interned stacks plus one entry per sample and marker); see
//! docs/exports.md. It never reads files itself.

use std::collections::HashMap;
use std::io::Write;

use fx::{
    CategoryColor, CategoryHandle, CpuDelta, Frame, FrameFlags, FrameInfo, MarkerFieldFlags,
    MarkerFieldFormat, MarkerTiming, ReferenceTimestamp, SamplingInterval, StaticSchemaMarker,
    StaticSchemaMarkerField, StringHandle, Timestamp,
};
use fxprof_processed_profile as fx;
use strobe_db::Profile;

use crate::error::Result;
use crate::source;

/// What a Firefox conversion wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FirefoxStats {
    /// Threads.
    pub threads: u64,
    /// Samples.
    pub samples: u64,
    /// Markers (regions and instants).
    pub markers: u64,
}

/// A region as a marker: its name, category and arguments.
struct RegionMarker {
    name: StringHandle,
    category: CategoryHandle,
    args: StringHandle,
}

impl StaticSchemaMarker for RegionMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "StrobeRegion";
    const DESCRIPTION: Option<&'static str> = Some("A strobe region (instrumented interval)");
    const CHART_LABEL: Option<&'static str> = Some("{marker.name}");
    const TOOLTIP_LABEL: Option<&'static str> = Some("{marker.name}");
    const TABLE_LABEL: Option<&'static str> = Some("{marker.name} {marker.data.args}");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[StaticSchemaMarkerField {
        key: "args",
        label: "Arguments",
        format: MarkerFieldFormat::String,
        flags: MarkerFieldFlags::SEARCHABLE,
    }];
    fn name(&self, _p: &mut fx::Profile) -> StringHandle {
        self.name
    }
    fn category(&self, _p: &mut fx::Profile) -> CategoryHandle {
        self.category
    }
    fn string_field_value(&self, _i: u32) -> StringHandle {
        self.args
    }
    fn number_field_value(&self, _i: u32) -> f64 {
        0.0
    }
}

/// Converts a profile to the Firefox Profiler's processed format.
pub fn write_firefox<W: Write>(p: &Profile, out: W) -> Result<FirefoxStats> {
    let procs = source::processes(p)?;
    let shifts = source::clock_shifts(&procs);
    let base = procs.iter().filter_map(|q| q.start).min().unwrap_or(0);
    let ts = |guid: &str, ns: i64| {
        Timestamp::from_nanos_since_reference(
            (ns + shifts.get(guid).copied().unwrap_or(0) - base).max(0) as u64,
        )
    };
    let period = crate::pprof::sampling_period_ns(p);
    let product = procs
        .first()
        .map(|q| q.short_name())
        .unwrap_or_else(|| "strobe".into());
    let mut prof = fx::Profile::new(
        &product,
        ReferenceTimestamp::from_millis_since_unix_epoch(0.0),
        SamplingInterval::from_nanos(period as u64),
    );
    let sample_cat = prof.add_category("Samples", CategoryColor::Blue);
    let region_cat = prof.add_category("Regions", CategoryColor::Yellow);
    let mut fprocs = HashMap::new();
    for q in &procs {
        let h = prof.add_process(
            &format!("{} ({})", q.short_name(), q.pid),
            q.pid as u32,
            ts(&q.guid, q.start.unwrap_or(base)),
        );
        fprocs.insert(q.guid.clone(), (h, q.pid));
    }
    let mut st = FirefoxStats::default();
    let mut threads: HashMap<(String, i64), fx::ThreadHandle> = HashMap::new();
    for t in p.threads()? {
        let t = t?;
        let Some(&(ph, pid)) = fprocs.get(&t.guid) else {
            continue;
        };
        let h = prof.add_thread(
            ph,
            t.tid as u32,
            ts(&t.guid, t.start.unwrap_or(base)),
            t.tid == pid,
        );
        prof.set_thread_name(h, t.name.as_deref().unwrap_or(&format!("thread {}", t.tid)));
        if let Some(e) = t.end {
            prof.set_thread_end_time(h, ts(&t.guid, e));
        }
        threads.insert((t.guid.clone(), t.tid), h);
        st.threads += 1;
    }
    let mut thread_of = |prof: &mut fx::Profile,
                         guid: &str,
                         tid: i64,
                         st: &mut FirefoxStats|
     -> Option<fx::ThreadHandle> {
        if let Some(h) = threads.get(&(guid.to_string(), tid)) {
            return Some(*h);
        }
        let &(ph, pid) = fprocs.get(guid)?;
        let h = prof.add_thread(
            ph,
            tid as u32,
            Timestamp::from_nanos_since_reference(0),
            tid == pid,
        );
        prof.set_thread_name(h, &format!("thread {tid}"));
        threads.insert((guid.to_string(), tid), h);
        st.threads += 1;
        Some(h)
    };
    let mut stacks: HashMap<(fx::ThreadHandle, String, i64), Option<fx::StackHandle>> =
        HashMap::new();
    for s in p.samples()? {
        let s = s?;
        let Some(th) = thread_of(&mut prof, &s.guid, s.tid, &mut st) else {
            continue;
        };
        let stack = match s.stack_id {
            None => None,
            Some(id) => match stacks.get(&(th, s.guid.clone(), id)) {
                Some(h) => *h,
                None => {
                    let names: Vec<StringHandle> = s
                        .frames
                        .iter()
                        .rev()
                        .map(|f| prof.intern_string(&source::frame_name(f)))
                        .collect();
                    let h = prof.intern_stack_frames(
                        th,
                        names.into_iter().map(|n| FrameInfo {
                            frame: Frame::Label(n),
                            category_pair: sample_cat.into(),
                            flags: FrameFlags::empty(),
                        }),
                    );
                    stacks.insert((th, s.guid.clone(), id), h);
                    h
                }
            },
        };
        prof.add_sample(
            th,
            ts(&s.guid, s.timestamp),
            stack,
            CpuDelta::from_nanos(period as u64),
            1,
        );
        st.samples += 1;
    }
    for r in source::regions(p)? {
        let r = r?;
        let Some(th) = thread_of(&mut prof, &r.guid, r.tid, &mut st) else {
            continue;
        };
        let args = r
            .args
            .iter()
            .map(|(n, _, v)| format!("{n}={v}"))
            .collect::<Vec<_>>()
            .join(", ");
        let m = RegionMarker {
            name: prof.intern_string(&r.name),
            category: region_cat,
            args: prof.intern_string(&args),
        };
        let timing = if r.is_marker() {
            MarkerTiming::Instant(ts(&r.guid, r.start))
        } else {
            MarkerTiming::Interval(ts(&r.guid, r.start), ts(&r.guid, r.end))
        };
        prof.add_marker(th, timing, m);
        st.markers += 1;
    }
    let mut out = out;
    serde_json::to_writer(&mut out, &prof)?;
    out.flush()?;
    Ok(st)
}
