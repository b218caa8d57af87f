//! Firefox Profiler output (processed profile JSON) through
//! `fxprof-processed-profile`.
//!
//! Owns [`write_firefox`]: one Firefox process per profiled process, one
//! thread per thread with its on-CPU samples (stacks as labelled frames,
//! outermost first, each weighted by the time it stands for: weight type
//! `tracing-ms`), its off-CPU samples as `off-CPU` interval markers over
//! the blocked time (with the stack where the thread blocked) and its
//! regions as interval markers (instants for zero-length regions), in the
//! format profiler.firefox.com loads with "Load a profile from file". The
//! library builds the whole profile in memory before serialising it, so
//! this exporter's memory grows with the data (interned stacks plus one
//! entry per sample and marker); see docs/exports.md. It never reads
//! files itself.

use std::collections::HashMap;
use std::io::Write;

use fx::{
    CategoryColor, CategoryHandle, CpuDelta, Frame, FrameFlags, FrameInfo, MarkerFieldFlags,
    MarkerFieldFormat, MarkerTiming, ReferenceTimestamp, SamplingInterval, StaticSchemaMarker,
    StaticSchemaMarkerField, StringHandle, Timestamp, WeightType,
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
    /// Samples (on-CPU samples; the samples tables).
    pub samples: u64,
    /// Markers (regions and instants).
    pub markers: u64,
    /// Off-CPU samples, written as `off-CPU` interval markers.
    pub off_cpu_markers: u64,
}

/// Nanoseconds per millisecond.
const NS_PER_MS: u64 = 1_000_000;

/// Integer millisecond weights for the samples of one stack of one thread
/// whose exact total stays within half a millisecond of the nanoseconds
/// it stands for: the library stores sample weights as integers, so each
/// sample gets the change of the rounded running total.
#[derive(Default)]
struct MsCarry {
    /// Time of the stack's samples so far (ns).
    ns: u64,
    /// Milliseconds given to them so far.
    ms: u64,
}

impl MsCarry {
    fn add(&mut self, ns: u64) -> i32 {
        self.ns = self.ns.saturating_add(ns);
        let total = self.ns.saturating_add(NS_PER_MS / 2) / NS_PER_MS;
        let w = total.saturating_sub(self.ms);
        self.ms = total;
        i32::try_from(w).unwrap_or(i32::MAX)
    }
}

/// An off-CPU sample as a marker: the time a thread spent blocked, named
/// after the function it blocked in.
struct OffCpuMarker {
    name: StringHandle,
    category: CategoryHandle,
    function: StringHandle,
    blocked_ms: f64,
}

impl StaticSchemaMarker for OffCpuMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "StrobeOffCpu";
    const DESCRIPTION: Option<&'static str> =
        Some("Time the thread spent blocked (off CPU), with the stack where it blocked");
    const CHART_LABEL: Option<&'static str> = Some("{marker.data.function}");
    const TOOLTIP_LABEL: Option<&'static str> = Some("off-CPU: {marker.data.function}");
    const TABLE_LABEL: Option<&'static str> = Some("off-CPU: {marker.data.function}");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[
        StaticSchemaMarkerField {
            key: "function",
            label: "Blocked in",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
        StaticSchemaMarkerField {
            key: "blocked",
            label: "Blocked for",
            format: MarkerFieldFormat::Milliseconds,
            flags: MarkerFieldFlags::empty(),
        },
    ];
    fn name(&self, _p: &mut fx::Profile) -> StringHandle {
        self.name
    }
    fn category(&self, _p: &mut fx::Profile) -> CategoryHandle {
        self.category
    }
    fn string_field_value(&self, _i: u32) -> StringHandle {
        self.function
    }
    fn number_field_value(&self, _i: u32) -> f64 {
        self.blocked_ms
    }
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
    let off_cpu_cat = prof.add_category("Off-CPU", CategoryColor::Gray);
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
        prof.set_thread_samples_weight_type(h, WeightType::TracingMs);
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
        prof.set_thread_samples_weight_type(h, WeightType::TracingMs);
        threads.insert((guid.to_string(), tid), h);
        st.threads += 1;
        Some(h)
    };
    let mut stacks: HashMap<(fx::ThreadHandle, String, i64), Option<fx::StackHandle>> =
        HashMap::new();
    let mut carries: HashMap<(fx::ThreadHandle, Option<i64>), MsCarry> = HashMap::new();
    let off_cpu_name = prof.intern_string("off-CPU");
    let time_kind = strobe_db::summary::time_kind(p)?.category();
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
        if source::is_off_cpu(&s.kind) {
            let function = s
                .frames
                .first()
                .map(source::frame_name)
                .unwrap_or_else(|| "[no stack]".into());
            let m = OffCpuMarker {
                name: off_cpu_name,
                category: off_cpu_cat,
                function: prof.intern_string(&function),
                blocked_ms: s.weight_ns as f64 / NS_PER_MS as f64,
            };
            let end = s
                .timestamp
                .saturating_add(s.weight_ns.min(i64::MAX as u64) as i64);
            let timing = MarkerTiming::Interval(ts(&s.guid, s.timestamp), ts(&s.guid, end));
            let h = prof.add_marker(th, timing, m);
            prof.set_marker_stack(th, h, stack);
            st.off_cpu_markers += 1;
            continue;
        }
        if !s.kind.is_empty() && s.kind != time_kind {
            // Real-time samples where CPU-time ones exist: not CPU time.
            continue;
        }
        let ns = source::cpu_weight_ns(&s, period);
        let weight = carries.entry((th, s.stack_id)).or_default().add(ns);
        prof.add_sample(
            th,
            ts(&s.guid, s.timestamp),
            stack,
            CpuDelta::from_nanos(ns),
            weight,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ms_carry_keeps_each_stack_within_half_a_millisecond() {
        // 0.4 ms samples: integer weights 0 or 1 whose running total stays
        // the rounded exact time.
        let mut c = MsCarry::default();
        let w: Vec<i32> = (0..10).map(|_| c.add(400_000)).collect();
        assert_eq!(w.iter().sum::<i32>(), 4);
        let mut exact = 0u64;
        let mut given = 0i64;
        let mut c = MsCarry::default();
        for k in 0..1000u64 {
            let ns = 100_000 + (k * 7919) % 3_000_000;
            exact += ns;
            given += i64::from(c.add(ns));
            assert!((given as f64 - exact as f64 / 1e6).abs() <= 0.5);
        }
        // Whole milliseconds pass through unchanged.
        let mut c = MsCarry::default();
        assert_eq!((c.add(4_000_000), c.add(1_000_000)), (4, 1));
    }
}
