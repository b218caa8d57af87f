//! One process's profile database, written from what its rings held.
//!
//! Owns turning records into rows: samples with their call stacks as
//! (module, relative pc) frames, begin/end pairs as regions, markers,
//! tracing notifications, thread life and names, modules, and the counter
//! series derived from samples (peak RSS, thread CPU time). Never runs in
//! the profiled process; never symbolizes (the CLI does that after the run).

use crate::{MetricDef, ProfileCounter};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use strobe_db::{
    Arg, CounterId, CounterInfo, DbError, EventId, MetricRow, ModuleId, ModuleRow, ProcessInfo,
    Region, SampleKind, SampleMeta, StackFrame, StringId, ThreadInfo, ThreadRef, TrackId,
    WeightScale, Writer, WriterOptions,
};
use strobe_wire::record::{CounterReading, COUNTER_MISSING};
use strobe_wire::sample::Sample;

/// A module as the runtime announced it, or as `/proc/PID/maps` shows
/// it (`strobe_symbols::proc_maps`): path, bias, executable and mapped
/// ranges, build id.
pub use strobe_symbols::proc_maps::Module;

/// Most counted regions remembered for a counter that has no row yet (a
/// counter that never opens keeps the list full: 8 MiB).
const MAX_PENDING_REGIONS: usize = 1 << 20;

/// What `rocpd_info_pmc.extdata` says of the counters read per thread
/// (`sampling_events`): readers tell them from other counters by it.
pub const PROFILE_COUNTER_EXTDATA: &str = r#"{"strobe":"sampling_events","per_region":"change from the region's begin to its end (rocpd_pmc_event)","per_sample":"change since the thread's previous sample (strobe_counter_sample on the thread's track)"}"#;

/// Thread CPU time is written at most this often per thread.
const CPU_COUNTER_INTERVAL_NS: u64 = 100_000_000;

/// An open tracing begin/end pair: start, counter readings at the begin,
/// name at the begin (for a pair never closed).
type OpenPair = (u64, Vec<CounterReading>, String);

/// A user-API region still open: name, start, the thread's counter
/// readings at the begin, and the time of the regions nested in it that
/// ended so far.
struct OpenRegion {
    name: StringId,
    start: u64,
    begin: Vec<CounterReading>,
    nested_ns: u64,
}

/// Completed regions of one name on one thread (see
/// `strobe_db::RegionStats`).
#[derive(Debug, Clone, Copy, Default)]
struct Calls {
    calls: u64,
    total_ns: u64,
    self_ns: u64,
    kept: u64,
    kept_ns: u64,
}

/// The writer and what it needs to turn records into rows.
pub struct Profile {
    writer: Writer,
    threads: FastMap<i32, (ThreadRef, TrackId)>,
    /// Threads named through the user API (their name is kept at exit).
    named: HashSet<i32>,
    /// Executable ranges of modules in the database: (start, end, bias, id).
    ranges: Vec<(u64, u64, u64, ModuleId)>,
    written_modules: Vec<Module>,
    /// Open regions per thread: (name, start, counter readings).
    stacks: FastMap<i32, Vec<OpenRegion>>,
    /// Regions shorter than this (ns) are counted, not stored (0: all
    /// stored, no statistics).
    time_filter_ns: u64,
    /// Per (thread, name): the statistics row's id and the statistics,
    /// whether changed since last written.
    stats: FastMap<(i32, StringId), (i64, Calls, bool)>,
    /// Open tracing begin/end pairs: (tid, unique id, instance) → (start,
    /// counter readings, name).
    open: HashMap<(i32, u64, u64), OpenPair>,
    texts: FastMap<String, StringId>,
    /// Strings of the runtime's string table by its id (regions' names).
    runtime_texts: FastMap<u32, StringId>,
    frames: Vec<StackFrame>,
    rss_counter: Option<CounterId>,
    cpu_counter: Option<CounterId>,
    last_rss_kb: u64,
    last_cpu_write: HashMap<i32, u64>,
    /// The counters read per thread, in the records' order, and each
    /// one's row once it had a value.
    counters: Vec<ProfileCounter>,
    counter_rows: Vec<Option<CounterId>>,
    /// Counted regions written while some counter had no row yet: they
    /// get that counter's NULL row when its row is written, so every
    /// counted region has one row per counter (at most
    /// [`MAX_PENDING_REGIONS`] are kept).
    pending_regions: Vec<EventId>,
    /// Rows of the process-level series, once written.
    process_rows: [Option<CounterId>; crate::procstat::SERIES.len()],
    /// The first error; later records are still attempted.
    pub error: Option<String>,
    /// Samples and regions written.
    pub rows: u64,
}

type Result<T> = std::result::Result<T, DbError>;

/// The maps looked up for every record: foldhash (seeded per process, so a
/// program cannot choose colliding names) costs a fraction of SipHash.
type FastMap<K, V> = foldhash::HashMap<K, V>;

impl Profile {
    /// Creates the database at `path` (or the first free `.1`, `.2`, …
    /// beside it).
    pub fn create(path: &Path, process: &ProcessInfo, options: WriterOptions) -> Result<Profile> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|error| DbError::Io {
                path: parent.to_path_buf(),
                error,
            })?;
        }
        Ok(Profile {
            writer: Writer::create_unique(path, process, options)?,
            threads: FastMap::default(),
            named: HashSet::new(),
            ranges: Vec::new(),
            written_modules: Vec::new(),
            stacks: FastMap::default(),
            time_filter_ns: 0,
            stats: FastMap::default(),
            open: HashMap::new(),
            texts: FastMap::default(),
            runtime_texts: FastMap::default(),
            frames: Vec::new(),
            rss_counter: None,
            cpu_counter: None,
            last_rss_kb: 0,
            last_cpu_write: HashMap::new(),
            counters: Vec::new(),
            counter_rows: Vec::new(),
            pending_regions: Vec::new(),
            process_rows: [None; crate::procstat::SERIES.len()],
            error: None,
            rows: 0,
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        self.writer.path()
    }

    /// Stores only user-API regions at least `ns` long, counting every one
    /// in `strobe_region_stats` (0: store all). Once, right after
    /// [`Profile::create`].
    pub fn use_time_filter(&mut self, ns: u64) {
        self.time_filter_ns = ns;
    }

    /// The counters records carry values of, and the derived metrics to
    /// keep (`strobe_metric`). Once, right after [`Profile::create`].
    pub fn use_counters(&mut self, counters: &[ProfileCounter], metrics: &[MetricDef]) {
        self.counters = counters.to_vec();
        self.counter_rows = vec![None; counters.len()];
        for m in metrics {
            let r = self.writer.add_metric(&MetricRow {
                name: &m.name,
                kind: &m.kind,
                expression: &m.expression,
                unit: m.unit.as_deref(),
                description: m.description.as_deref(),
                requested: m.requested,
            });
            self.note(r);
        }
    }

    /// The row of counter `i`, written on first use.
    fn counter_row(&mut self, i: usize) -> Result<Option<CounterId>> {
        if let Some(id) = self.counter_rows.get(i).copied().flatten() {
            return Ok(Some(id));
        }
        let Some(c) = self.counters.get(i) else {
            return Ok(None);
        };
        let id = self.writer.add_counter_with(
            &CounterInfo {
                name: &c.name,
                description: Some(&c.description),
                units: Some(&c.unit),
                component: Some(&c.component),
                accumulating: true,
                expression: None,
            },
            PROFILE_COUNTER_EXTDATA,
        )?;
        self.counter_rows[i] = Some(id);
        // The regions written before it had no row for it.
        for &ev in &self.pending_regions {
            self.writer.append_pmc_event(ev, id, None)?;
        }
        if self.counter_rows.iter().all(Option::is_some) {
            self.pending_regions = Vec::new();
        }
        Ok(Some(id))
    }

    /// A counter's raw change in its unit.
    fn scaled(&self, i: usize, raw: u64) -> f64 {
        raw as f64 * self.counters.get(i).map_or(1.0, |c| c.scale)
    }

    /// The counters' changes over the region whose event is `ev`: one
    /// `rocpd_pmc_event` row per counter that ever had a value in this
    /// process, NULL where the change is not known.
    fn region_counters(
        &mut self,
        ev: EventId,
        begin: &[CounterReading],
        end: &[CounterReading],
    ) -> Result<()> {
        for i in 0..self.counters.len() {
            let change = match (begin.get(i), end.get(i)) {
                (Some(b), Some(e)) => e.delta_since(b),
                _ => None,
            };
            let row = match (self.counter_rows[i], change) {
                (Some(id), _) => Some(id),
                (None, Some(_)) => self.counter_row(i)?,
                (None, None) => None,
            };
            if let Some(id) = row {
                let value = change.map(|d| self.scaled(i, d));
                self.writer.append_pmc_event(ev, id, value)?;
            }
        }
        if self.counter_rows.iter().any(Option::is_none)
            && self.pending_regions.len() < MAX_PENDING_REGIONS
        {
            self.pending_regions.push(ev);
        }
        Ok(())
    }

    /// A sample's counter changes as points of the thread's counter
    /// series (missing ones are left out).
    fn sample_counters(&mut self, s: &Sample<'_>, track: TrackId) -> Result<()> {
        for (i, &v) in s.counters.iter().enumerate() {
            if v == COUNTER_MISSING {
                continue;
            }
            if let Some(id) = self.counter_row(i)? {
                let value = self.scaled(i, v);
                self.writer
                    .append_counter_sample(id, Some(track), s.timestamp_ns, value)?;
            }
        }
        Ok(())
    }

    /// One reading of the process-level series.
    pub fn process_point(&mut self, p: &crate::procstat::Point) -> Result<()> {
        for (j, value) in p.values.iter().enumerate() {
            let Some(value) = *value else {
                continue;
            };
            let id = match self.process_rows[j] {
                Some(id) => id,
                None => {
                    let s = &crate::procstat::SERIES[j];
                    let id = self.writer.add_counter(&CounterInfo {
                        name: s.name,
                        description: Some(s.description),
                        units: Some(s.unit),
                        component: Some("procfs"),
                        accumulating: s.accumulating,
                        expression: None,
                    })?;
                    self.process_rows[j] = Some(id);
                    id
                }
            };
            self.writer
                .append_counter_sample(id, None, p.at_ns, value)?;
        }
        Ok(())
    }

    /// Causal experiments that ended, and the in-scope sample counts.
    pub fn causal(
        &mut self,
        experiments: &[strobe_db::CausalExperiment],
        samples: &[(String, u64)],
    ) -> Result<()> {
        for e in experiments {
            self.writer.causal_experiment(e)?;
        }
        if !samples.is_empty() {
            self.writer.causal_samples(samples)?;
        }
        Ok(())
    }

    /// Remembers the first failure.
    pub fn note(&mut self, r: Result<()>) {
        if let Err(e) = r {
            if self.error.is_none() {
                self.error = Some(e.to_string());
            }
        }
    }

    /// The thread's row and sample track, created on first use.
    pub fn thread(&mut self, tid: i32, start: Option<u64>) -> Result<(ThreadRef, TrackId)> {
        match self.threads.get(&tid) {
            Some(t) => Ok(*t),
            None => self.add_thread(tid, start, None),
        }
    }

    /// Writes a new thread's row and sample track.
    fn add_thread(
        &mut self,
        tid: i32,
        start: Option<u64>,
        name: Option<&str>,
    ) -> Result<(ThreadRef, TrackId)> {
        let thread = self.writer.add_thread(&ThreadInfo {
            tid: tid as u32,
            name,
            start_ns: start,
        })?;
        let track = self.writer.add_track(Some(thread), "samples")?;
        self.threads.insert(tid, (thread, track));
        Ok((thread, track))
    }

    /// Thread `tid` started (at `start`, when known) or was first seen
    /// with the kernel name `name` (empty: unknown), which names it until
    /// the program or its end names it otherwise. Its row may exist
    /// already (a sample read first, from its own ring).
    pub fn thread_seen(&mut self, tid: i32, start: Option<u64>, name: &str) -> Result<()> {
        let name = (!name.is_empty()).then_some(name);
        match self.threads.get(&tid) {
            None => self.add_thread(tid, start, name).map(|_| ()),
            Some(&(thread, _)) => match name {
                Some(name) if !self.named.contains(&tid) => {
                    self.writer.set_thread_name(thread, name)
                }
                _ => Ok(()),
            },
        }
    }

    /// The program named a thread.
    pub fn name_thread(&mut self, tid: i32, name: &str) -> Result<()> {
        let (thread, _) = self.thread(tid, None)?;
        self.named.insert(tid);
        self.writer.set_thread_name(thread, name)
    }

    /// A thread ended with the kernel name `name`.
    pub fn end_thread(&mut self, tid: i32, name: &str, at: u64) -> Result<()> {
        let (thread, _) = self.thread(tid, None)?;
        if !name.is_empty() && !self.named.contains(&tid) {
            self.writer.set_thread_name(thread, name)?;
        }
        self.writer.end_thread(thread, at)
    }

    fn find(&self, pc: u64) -> Option<(Option<ModuleId>, u64)> {
        let i = self.ranges.partition_point(|&(start, _, _, _)| start <= pc);
        let (_, end, bias, id) = *self.ranges.get(i.checked_sub(1)?)?;
        // A module's bias lies at or below its code (checked when the
        // record was decoded; wrapping keeps a bad one harmless).
        (pc < end).then(|| (Some(id), pc.wrapping_sub(bias)))
    }

    /// Writes a module (once).
    pub fn add_module(&mut self, m: &Module) -> Result<()> {
        if self.written_modules.contains(m) {
            return Ok(());
        }
        // The file itself, not the link the loader was given (liblzma.so.5
        // → liblzma.so.5.4.1): what kernel samples and perf name, so the
        // same code has one name whichever backend sampled it.
        let real = std::fs::canonicalize(&m.path).ok();
        let path = real.as_deref().and_then(|p| p.to_str()).unwrap_or(&m.path);
        let id = self.writer.add_module(&ModuleRow {
            path,
            build_id: (!m.build_id.is_empty()).then_some(m.build_id.as_str()),
            load_address: m.bias,
            size: m.mapped.end - m.mapped.start,
            file_offset: 0,
            load_ns: None,
        })?;
        // A reloaded library may reuse an address range: the newest wins.
        self.ranges
            .retain(|&(s, e, _, _)| e <= m.text.start || s >= m.text.end);
        let at = self
            .ranges
            .partition_point(|&(s, _, _, _)| s < m.text.start);
        self.ranges
            .insert(at, (m.text.start, m.text.end, m.bias, id));
        self.written_modules.push(m.clone());
        Ok(())
    }

    /// One sample of `kind` standing for `weight_ns`; `modules` are every
    /// module the process announced.
    pub fn sample(
        &mut self,
        s: &Sample<'_>,
        kind: SampleKind,
        weight_ns: u64,
        modules: &[Module],
    ) -> Result<()> {
        let (_, track) = self.thread(s.tid, None)?;
        let mut frames = std::mem::take(&mut self.frames);
        frames.clear();
        for (i, &pc) in s.frames.iter().enumerate() {
            // Return addresses point after the call: look the caller up at
            // the call instruction.
            let at = if i == 0 { pc } else { pc.saturating_sub(1) };
            let hit = match self.find(at) {
                Some(hit) => Some(hit),
                None => match modules.iter().find(|m| m.text.contains(&at)) {
                    Some(m) => {
                        self.add_module(m)?;
                        self.find(at)
                    }
                    None => None,
                },
            };
            let (module, rel_pc) = hit.unwrap_or((None, at));
            frames.push(StackFrame { module, rel_pc });
        }
        let meta = SampleMeta {
            timestamp_ns: s.timestamp_ns,
            kind,
            weight_ns,
        };
        let result = self.writer.append_sample(track, meta, &frames);
        self.frames = frames;
        result?;
        self.rows += 1;
        if !s.counters.is_empty() {
            self.sample_counters(s, track)?;
        }
        self.sample_metrics(s, track)
    }

    /// Scales the weights of thread `tid`'s samples of `kind` taken up to
    /// `until_ns` by `numerator / denominator`: `(tid, kind, until_ns,
    /// numerator, denominator)`.
    pub fn scale_weights(&mut self, factors: &[(i32, SampleKind, u64, u64, u64)]) -> Result<()> {
        let by_track: Vec<_> = factors
            .iter()
            .filter_map(|&(tid, kind, until_ns, numerator, denominator)| {
                Some(WeightScale {
                    track: self.threads.get(&tid)?.1,
                    kind,
                    until_ns,
                    numerator,
                    denominator,
                })
            })
            .collect();
        self.writer.scale_sample_weights(&by_track)
    }

    /// Peak RSS (when it grows) and the thread's CPU time (at most every
    /// 100 ms per thread) as counter series.
    fn sample_metrics(&mut self, s: &Sample<'_>, track: TrackId) -> Result<()> {
        if s.peak_rss_kb > self.last_rss_kb {
            self.last_rss_kb = s.peak_rss_kb;
            let counter = match self.rss_counter {
                Some(c) => c,
                None => *self
                    .rss_counter
                    .insert(self.writer.add_counter(&CounterInfo {
                        name: "peak_rss",
                        description: Some(
                            "peak resident set size of the process (getrusage ru_maxrss)",
                        ),
                        units: Some("KiB"),
                        component: Some("rusage"),
                        accumulating: false,
                        expression: None,
                    })?),
            };
            self.writer.append_counter_sample(
                counter,
                None,
                s.timestamp_ns,
                s.peak_rss_kb as f64,
            )?;
        }
        let last = self.last_cpu_write.entry(s.tid).or_insert(0);
        if s.cpu_time_ns > 0 && s.timestamp_ns >= last.saturating_add(CPU_COUNTER_INTERVAL_NS) {
            *last = s.timestamp_ns;
            let counter = match self.cpu_counter {
                Some(c) => c,
                None => *self
                    .cpu_counter
                    .insert(self.writer.add_counter(&CounterInfo {
                        name: "thread_cpu_time",
                        description: Some(
                            "CPU time of the sampled thread (CLOCK_THREAD_CPUTIME_ID)",
                        ),
                        units: Some("ns"),
                        component: Some("sampler"),
                        accumulating: true,
                        expression: None,
                    })?),
            };
            self.writer.append_counter_sample(
                counter,
                Some(track),
                s.timestamp_ns,
                s.cpu_time_ns as f64,
            )?;
        }
        Ok(())
    }

    /// The row of the runtime's string `id`, whose text `make` gives the
    /// first time.
    pub fn runtime_text(&mut self, id: u32, make: impl FnOnce() -> String) -> Result<StringId> {
        if let Some(row) = self.runtime_texts.get(&id) {
            return Ok(*row);
        }
        let row = self.text(&make())?;
        self.runtime_texts.insert(id, row);
        Ok(row)
    }

    /// The runtime (re)defined its string `id`.
    pub fn forget_runtime_text(&mut self, id: u32) {
        self.runtime_texts.remove(&id);
    }

    fn text(&mut self, text: &str) -> Result<StringId> {
        if let Some(id) = self.texts.get(text) {
            return Ok(*id);
        }
        let id = self.writer.intern_string(text)?;
        self.texts.insert(text.to_string(), id);
        Ok(id)
    }

    /// A region named `name` opens on thread `tid`, with the thread's
    /// counter readings (empty when the process counts nothing).
    pub fn region_begin(
        &mut self,
        tid: i32,
        name: StringId,
        at: u64,
        counters: Vec<CounterReading>,
    ) -> Result<()> {
        self.stacks.entry(tid).or_default().push(OpenRegion {
            name,
            start: at,
            begin: counters,
            nested_ns: 0,
        });
        Ok(())
    }

    /// The innermost open region of `tid` closes (ignored if none is
    /// open), with the thread's counter readings.
    pub fn region_end(&mut self, tid: i32, at: u64, counters: &[CounterReading]) -> Result<()> {
        let Some(stack) = self.stacks.get_mut(&tid) else {
            return Ok(());
        };
        let Some(OpenRegion {
            name,
            start,
            begin,
            nested_ns,
        }) = stack.pop()
        else {
            return Ok(());
        };
        if self.time_filter_ns > 0 {
            let ns = at.saturating_sub(start);
            if let Some(parent) = stack.last_mut() {
                parent.nested_ns = parent.nested_ns.saturating_add(ns);
            }
            let keep = ns >= self.time_filter_ns;
            self.count_call(tid, name, ns, nested_ns, keep);
            if !keep {
                return Ok(());
            }
        }
        if self.counters.is_empty() {
            return self.plain_region(tid, name, "user", start, at);
        }
        let ev = self.region(tid, name, "user", start, at, &[])?;
        self.region_counters(ev, &begin, counters)
    }

    /// Counts a completed region of `name` on `tid`, `ns` long, `nested_ns`
    /// of which in regions nested in it.
    fn count_call(&mut self, tid: i32, name: StringId, ns: u64, nested_ns: u64, kept: bool) {
        let next = self.stats.len() as i64 + 1;
        let (_, calls, changed) =
            self.stats
                .entry((tid, name))
                .or_insert((next, Calls::default(), true));
        calls.calls += 1;
        calls.total_ns = calls.total_ns.saturating_add(ns);
        calls.self_ns = calls.self_ns.saturating_add(ns.saturating_sub(nested_ns));
        if kept {
            calls.kept += 1;
            calls.kept_ns = calls.kept_ns.saturating_add(ns);
        }
        *changed = true;
    }

    /// Writes the statistics rows that changed since they were last
    /// written.
    fn write_region_stats(&mut self) -> Result<()> {
        let mut rows = Vec::new();
        let changed: Vec<(i32, StringId, i64, Calls)> = self
            .stats
            .iter_mut()
            .filter(|(_, (_, _, changed))| *changed)
            .map(|((tid, name), (id, calls, changed))| {
                *changed = false;
                (*tid, *name, *id, *calls)
            })
            .collect();
        for (tid, name, id, c) in changed {
            let (thread, _) = self.thread(tid, None)?;
            rows.push((
                id,
                strobe_db::RegionStats {
                    thread,
                    name,
                    calls: c.calls,
                    total_ns: c.total_ns,
                    self_ns: c.self_ns,
                    kept: c.kept,
                    kept_ns: c.kept_ns,
                },
            ));
        }
        self.writer.set_region_stats(&rows)
    }

    /// A completed MPI call: a region of category `mpi` nested under the
    /// thread's open regions, with the call's arguments.
    pub fn mpi_call(&mut self, tid: i32, call: &crate::mpi::MpiCall, end_ns: u64) -> Result<()> {
        let name = self.text(call.name)?;
        let args: Vec<Arg<'_>> = call
            .args
            .iter()
            .map(|(name, ty, value)| Arg { name, ty, value })
            .collect();
        self.region(tid, name, "mpi", call.begin_ns, end_ns, &args)
            .map(|_| ())
    }

    /// A clock comparison with the reference rank.
    pub fn clock_sync(&mut self, c: &strobe_db::ClockSync<'_>) -> Result<()> {
        self.writer.clock_sync(c)
    }

    /// An instant marker.
    pub fn mark(&mut self, tid: i32, name: StringId, at: u64) -> Result<()> {
        self.plain_region(tid, name, "marker", at, at)
    }

    /// A tracing notification: begin/end pairs become regions, everything
    /// else an instant (with a `trace_type` argument naming its type);
    /// `stream`, its stream's name when known, becomes the region's
    /// `stream` argument.
    /// `counters`: the thread's counter readings a begin or end carries.
    #[allow(clippy::too_many_arguments)]
    pub fn xpti(
        &mut self,
        tid: i32,
        trace_type: u16,
        uid: u64,
        instance: u64,
        name: &str,
        stream: Option<&str>,
        at: u64,
        counters: Vec<CounterReading>,
    ) -> Result<()> {
        let stream_arg = stream.map(|value| Arg {
            name: "stream",
            ty: "str",
            value,
        });
        let args = stream_arg.as_slice();
        let key = (tid, uid, instance);
        if let Some(category) = crate::trace_types::span_category(trace_type & !1) {
            if trace_type & 1 == 0 {
                self.open.insert(key, (at, counters, name.to_string()));
                return Ok(());
            }
            let Some((start, begin, _)) = self.open.remove(&key) else {
                return Ok(());
            };
            let name = self.text(name)?;
            if self.counters.is_empty() && args.is_empty() {
                return self.plain_region(tid, name, category, start, at);
            }
            let ev = self.region(tid, name, category, start, at, args)?;
            if !self.counters.is_empty() {
                self.region_counters(ev, &begin, &counters)?;
            }
            return Ok(());
        }
        let category = crate::trace_types::instant_category(trace_type);
        let type_name = crate::trace_types::instant_type_name(trace_type);
        let mut args = args.to_vec();
        args.push(Arg {
            name: "trace_type",
            ty: "str",
            value: &type_name,
        });
        let name = self.text(name)?;
        self.region(tid, name, category, at, at, &args).map(|_| ())
    }

    /// A region with an event of its own (for its args and counter
    /// values), returned.
    fn region(
        &mut self,
        tid: i32,
        name: StringId,
        category: &str,
        start_ns: u64,
        end_ns: u64,
        args: &[Arg<'_>],
    ) -> Result<EventId> {
        let r = self.region_on(tid, name, category, start_ns, end_ns, args)?;
        self.rows += 1;
        self.writer.append_region(&r)
    }

    /// A region with nothing attached: one row, sharing its category's
    /// event (the cheapest form; most regions are like this).
    fn plain_region(
        &mut self,
        tid: i32,
        name: StringId,
        category: &str,
        start_ns: u64,
        end_ns: u64,
    ) -> Result<()> {
        let r = self.region_on(tid, name, category, start_ns, end_ns, &[])?;
        self.rows += 1;
        self.writer.append_region_shared(&r)
    }

    /// The region row of thread `tid` (added if new) in `category`.
    fn region_on<'a>(
        &mut self,
        tid: i32,
        name: StringId,
        category: &str,
        start_ns: u64,
        end_ns: u64,
        args: &'a [Arg<'a>],
    ) -> Result<Region<'a>> {
        let (thread, _) = self.thread(tid, None)?;
        Ok(Region {
            thread,
            start_ns,
            end_ns,
            name,
            category: Some(self.text(category)?),
            stack: None,
            correlation_id: None,
            args,
        })
    }

    /// Regions still open at the end close there, marked unterminated.
    pub fn close_open_regions(&mut self, end_ns: u64) {
        let unterminated = [Arg {
            name: "unterminated",
            ty: "bool",
            value: "true",
        }];
        let stacks: Vec<_> = self.stacks.drain().collect();
        for (tid, stack) in stacks {
            for OpenRegion {
                name, start, begin, ..
            } in stack
            {
                let r = self
                    .region(tid, name, "user", start, end_ns, &unterminated)
                    .and_then(|ev| self.region_counters(ev, &begin, &[]));
                self.note(r);
            }
        }
        let open: Vec<_> = self.open.drain().collect();
        for ((tid, _, _), (start, begin, name)) in open {
            let r = self
                .text(&name)
                .and_then(|name| self.region(tid, name, "user", start, end_ns, &unterminated))
                .and_then(|ev| self.region_counters(ev, &begin, &[]));
            self.note(r);
        }
    }

    /// A `strobe_settings` row (run totals, notes).
    pub fn setting(&mut self, name: &str, value: &str) {
        let r = self.writer.add_setting(name, value);
        self.note(r);
    }

    /// Commits what was written (the periodic flush).
    pub fn commit(&mut self) {
        let r = self.write_region_stats().and_then(|()| self.writer.flush());
        self.note(r);
    }

    /// Closes the database; returns its totals.
    pub fn finish(mut self, end_ns: u64) -> Result<strobe_db::WriterTotals> {
        self.write_region_stats()?;
        self.writer.finish(end_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(dir: &Path) -> Profile {
        let process = ProcessInfo {
            pid: 1,
            ppid: 0,
            init_ns: 0,
            start_ns: 0,
            start_unix_ns: 0,
            command: "test".into(),
            environment: Vec::new(),
        };
        Profile::create(&dir.join("p.db"), &process, WriterOptions::default()).unwrap()
    }

    /// The statistics of `name` on `tid`: calls, total, self, kept, kept
    /// time.
    fn stats(p: &Profile, tid: i32, name: StringId) -> (u64, u64, u64, u64, u64) {
        let (_, c, _) = p.stats[&(tid, name)];
        (c.calls, c.total_ns, c.self_ns, c.kept, c.kept_ns)
    }

    #[test]
    fn regions_shorter_than_the_filter_are_counted_per_thread_and_name_not_stored() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = profile(dir.path());
        p.use_time_filter(100);
        let outer = p.text("outer").unwrap();
        let inner = p.text("inner").unwrap();
        // Thread 1: outer [0, 1000] around inner [10, 60] (too short) and
        // inner [100, 300].
        p.region_begin(1, outer, 0, Vec::new()).unwrap();
        p.region_begin(1, inner, 10, Vec::new()).unwrap();
        p.region_end(1, 60, &[]).unwrap();
        p.region_begin(1, inner, 100, Vec::new()).unwrap();
        p.region_end(1, 300, &[]).unwrap();
        p.region_end(1, 1000, &[]).unwrap();
        // Thread 2: one just under the filter, one exactly at it.
        p.region_begin(2, inner, 0, Vec::new()).unwrap();
        p.region_end(2, 99, &[]).unwrap();
        p.region_begin(2, inner, 1000, Vec::new()).unwrap();
        p.region_end(2, 1100, &[]).unwrap();
        // An end that comes before its begin (clocks of two CPUs): 0 ns.
        p.region_begin(3, inner, 500, Vec::new()).unwrap();
        p.region_end(3, 400, &[]).unwrap();
        // An end with nothing open: ignored.
        p.region_end(4, 5, &[]).unwrap();
        assert_eq!(stats(&p, 1, inner), (2, 250, 250, 1, 200));
        assert_eq!(
            stats(&p, 1, outer),
            (1, 1000, 750, 1, 1000),
            "self excludes nested"
        );
        assert_eq!(stats(&p, 2, inner), (2, 199, 199, 1, 100));
        assert_eq!(stats(&p, 3, inner), (1, 0, 0, 0, 0));
        assert_eq!(p.stats.len(), 4);
        assert_eq!(p.rows, 3, "only the regions kept are rows");
        assert!(p.error.is_none());
    }

    #[test]
    fn statistics_rows_keep_their_ids_and_are_written_again_only_when_changed() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = profile(dir.path());
        p.use_time_filter(1_000);
        let a = p.text("a").unwrap();
        let b = p.text("b").unwrap();
        for (tid, name) in [(1, a), (1, b), (2, a)] {
            p.region_begin(tid, name, 0, Vec::new()).unwrap();
            p.region_end(tid, 10, &[]).unwrap();
        }
        let ids: Vec<i64> = [(1, a), (1, b), (2, a)]
            .iter()
            .map(|k| p.stats[k].0)
            .collect();
        assert_eq!(ids, [1, 2, 3]);
        assert!(p.stats.values().all(|(_, _, changed)| *changed));
        p.commit();
        assert!(p.error.is_none(), "{:?}", p.error);
        assert!(p.stats.values().all(|(_, _, changed)| !*changed));
        p.region_begin(1, b, 20, Vec::new()).unwrap();
        p.region_end(1, 25, &[]).unwrap();
        assert!(p.stats[&(1, b)].2);
        assert!(!p.stats[&(1, a)].2);
        assert_eq!(p.stats[&(1, b)].0, 2, "the same row");
        assert_eq!(stats(&p, 1, b), (2, 15, 15, 0, 0));
    }

    #[test]
    fn without_a_filter_every_region_is_stored_and_none_counted() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = profile(dir.path());
        let a = p.text("a").unwrap();
        for (start, end) in [(0, 1), (5, 5), (10, 2_000_000)] {
            p.region_begin(1, a, start, Vec::new()).unwrap();
            p.region_end(1, end, &[]).unwrap();
        }
        assert_eq!(p.rows, 3);
        assert!(p.stats.is_empty());
        // Regions still open at the end are stored, marked unterminated.
        p.region_begin(1, a, 7, Vec::new()).unwrap();
        p.region_begin(2, a, 8, Vec::new()).unwrap();
        p.close_open_regions(100);
        assert_eq!(p.rows, 5);
        assert!(p.stacks.is_empty());
    }
}
