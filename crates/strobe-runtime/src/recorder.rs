//! The recorder: where this process's samples, regions, markers and threads
//! go, and the only owner of its database.
//!
//! Producers hand records to the buffered record service (`strobe-buffer`):
//! samples from the sampler's allocator threads, XPTI notifications
//! (strobe's own regions and markers, and those of XPTI-instrumented code)
//! drained by the runtime's ticker. The buffer's callback, on a delivery
//! thread of its own, turns them into database rows: samples with their
//! call stacks as (module, relative pc) frames, begin/end pairs as regions.
//! Thread starts, names and ends are rare and arrive through a small locked
//! list. The database writer sits behind one lock taken by the delivery
//! thread and, for periodic commits and the final close, by the ticker.
//!
//! Never runs in a signal handler except [`emergency_flush`], which only
//! writes to an eventfd and polls with a time limit.

use crate::log::log_at;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use strobe_buffer::record::{RecordHeader, SampleRecord, XptiRecord};
use strobe_buffer::{Buffer, BufferOptions, CallbackThread, Context, Delivery, Kind, Policy};
use strobe_core::clock::now_ns;
use strobe_core::output_path::{expand_template, ProcessIdentity};
use strobe_core::settings::{Key, Settings};
use strobe_db::{
    Arg, CounterId, CounterInfo, ModuleId, ModuleInfo as DbModule, ProcessInfo, Region, StackFrame,
    StringId, ThreadInfo, ThreadRef, TrackId, Writer, WriterOptions,
};
use strobe_sampler::{ModuleInfo, Sample, SampleSink, SamplerStats, TimerClock};
use strobe_trace::types::trace_point;

/// Environment variable naming the launcher's session manifest: each
/// runtime appends the path of its database, one per line.
const SESSION_ENV: &str = "STROBE_INTERNAL_SESSION";

/// A thread event from a program thread, applied by the writer side.
enum ThreadNote {
    Started { tid: i32, at: u64 },
    Named { tid: i32, name: String },
    Ended { tid: i32, name: String, at: u64 },
}

/// Receives everything a process records.
pub struct Recorder {
    path: PathBuf,
    buffer: Buffer,
    _context: Context,
    state: Arc<Mutex<WriterState>>,
    notes: Arc<Mutex<Vec<ThreadNote>>>,
    samples_seen: AtomicU64,
}

/// The database path for this process: `output_dir/<template>`, with `.1`,
/// `.2`, … before the extension if the file exists (an `exec`'d image keeps
/// its pid).
pub fn database_path(settings: &Settings) -> Result<PathBuf, String> {
    let id = ProcessIdentity::current();
    let relative =
        expand_template(settings.text(Key::OutputFile), &id).map_err(|e| e.to_string())?;
    let dir = settings.path(Key::OutputDir).unwrap_or(Path::new("."));
    let base = dir.join(relative);
    if let Some(parent) = base.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    let stem = base
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = base
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    let mut candidate = base.clone();
    let mut n = 0;
    while candidate.exists() {
        n += 1;
        candidate = base.with_file_name(format!("{stem}.{n}{ext}"));
    }
    Ok(candidate)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Recorder {
    /// Creates this process's database and the buffer that feeds it.
    pub fn open(settings: &Settings) -> Result<Recorder, String> {
        let path = database_path(settings)?;
        let mut process = ProcessInfo::current();
        process.environment = std::env::vars()
            .filter(|(k, _)| {
                k.starts_with("STROBE_") || k == "LD_PRELOAD" || k == "OMP_NUM_THREADS"
            })
            .collect();
        let options = WriterOptions {
            flush_interval: Duration::from_nanos(settings.duration_ns(Key::FlushInterval).max(1)),
            settings: settings
                .iter()
                .filter_map(|(def, r)| Some((def.name.to_string(), r.value.as_ref()?.to_string())))
                .collect(),
            ..WriterOptions::default()
        };
        let writer = Writer::create(&path, &process, options).map_err(|e| e.to_string())?;
        announce(&path);
        let state = Arc::new(Mutex::new(WriterState::new(writer)));
        let notes: Arc<Mutex<Vec<ThreadNote>>> = Arc::new(Mutex::new(Vec::new()));
        let context = Context::create().map_err(|e| e.to_string())?;
        let size = settings.int(Key::BufferSize) as usize;
        let policy = if settings.text(Key::BufferPolicy) == "discard" {
            Policy::Discard
        } else {
            Policy::Lossless
        };
        // A delivery thread of our own: the shared default one may not exist
        // (in a forked child it belongs to the parent).
        let thread = CallbackThread::create().map_err(|e| e.to_string())?;
        let options = BufferOptions::new(size, size / 4 * 3, policy).on_callback_thread(thread);
        let buffer = {
            let (state, notes) = (state.clone(), notes.clone());
            Buffer::create(&context, options, move |d: &Delivery<'_>| {
                // Thread notes first: a sample may belong to a thread that
                // just started.
                let pending = std::mem::take(&mut *lock(&notes));
                let mut state = lock(&state);
                state.apply_notes(pending);
                state.deliver(d);
            })
            .map_err(|e| e.to_string())?
        };
        for kind in [Kind::Sample, Kind::Xpti] {
            context
                .configure_buffer_tracing(kind, None, &buffer)
                .map_err(|e| e.to_string())?;
        }
        context.start().map_err(|e| e.to_string())?;
        Ok(Recorder {
            path,
            buffer,
            _context: context,
            state,
            notes,
            samples_seen: AtomicU64::new(0),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A program thread started.
    pub fn thread_started(&self, id: &strobe_core::thread::ThreadIdentity) {
        lock(&self.notes).push(ThreadNote::Started {
            tid: id.tid,
            at: now_ns(),
        });
    }

    /// A thread that existed before the runtime started is sampled too.
    pub fn thread_adopted(&self, tid: i32) {
        lock(&self.notes).push(ThreadNote::Started { tid, at: now_ns() });
    }

    /// The program named a thread through the user API.
    pub fn thread_named(&self, tid: i32, name: String) {
        lock(&self.notes).push(ThreadNote::Named { tid, name });
    }

    /// A program thread ended.
    pub fn thread_ended(&self, id: &strobe_core::thread::ThreadIdentity, name: String) {
        lock(&self.notes).push(ThreadNote::Ended {
            tid: id.tid,
            name,
            at: now_ns(),
        });
    }

    /// Hands trace notifications to the buffer (the ticker calls this with
    /// what it drained from the tracing recorder).
    pub fn trace_records(&self, records: &[strobe_trace::recorder::TraceRecord]) {
        for r in records {
            let record = XptiRecord {
                timestamp_ns: r.timestamp_ns,
                unique_id: r.event_uid,
                parent_unique_id: r.parent_uid,
                instance: r.instance,
                user_data: r.user_data as u64,
                tid: r.thread as u32,
                trace_type: r.trace_type,
                stream_id: r.stream,
                reserved: 0,
            };
            let op = strobe_buffer::kind::xpti_operation_for_trace_type(r.trace_type).unwrap_or(0);
            strobe_buffer::emit(op, &record);
        }
    }

    /// Holds the writer across `fork()`: every SQLite call of the process
    /// happens under this lock, so while it is held no thread is inside
    /// SQLite and the child does not inherit one of SQLite's global mutexes
    /// locked by a thread that does not exist there. The parent drops the
    /// guard after the fork; the child forgets it (it never uses the
    /// parent's writer).
    pub fn hold_for_fork(&self) -> ForkGuard<'_> {
        ForkGuard(lock(&self.state))
    }

    /// Delivers everything buffered and commits it (the periodic flush).
    pub fn flush(&self) {
        let _ = self.buffer.flush();
        let notes = std::mem::take(&mut *lock(&self.notes));
        let mut state = lock(&self.state);
        state.apply_notes(notes);
        state.commit();
    }

    /// Writes everything and closes the database; returns a one-line summary.
    pub fn finish(&self, stats: Option<SamplerStats>) -> Result<String, String> {
        let _ = self.buffer.flush();
        let notes = std::mem::take(&mut *lock(&self.notes));
        let mut state = lock(&self.state);
        state.apply_notes(notes);
        let end = now_ns();
        state.close_open_regions(end);
        state.record_all_modules();
        let Some(mut writer) = state.writer.take() else {
            return Err("the database was already closed".into());
        };
        let buffer_stats = self.buffer.stats();
        let lost = stats.map_or(0, |s| s.lost_ring_full + s.lost_reentrant);
        for (name, value) in [
            ("sampler.samples_taken", stats.map_or(0, |s| s.samples)),
            ("sampler.samples_lost", lost),
            (
                "sampler.timer_overruns",
                stats.map_or(0, |s| s.timer_overruns),
            ),
            (
                "sampler.incomplete_stacks",
                stats.map_or(0, |s| s.incomplete),
            ),
            ("buffer.records_dropped", buffer_stats.records_dropped),
        ] {
            // Totals of the run, next to finish()'s own totals.
            if let Err(e) = writer.add_setting(name, &value.to_string()) {
                state.fail(e);
            }
        }
        if let Some(e) = &state.error {
            log_at!(0, "some records could not be written: {e}");
        }
        let totals = writer.finish(end).map_err(|e| e.to_string())?;
        if totals.samples == 0 && totals.regions == 0 {
            // A process that recorded nothing (a shell forked just to exec,
            // say) leaves no database behind.
            for suffix in ["", "-wal", "-shm"] {
                let mut p = self.path.clone().into_os_string();
                p.push(suffix);
                let _ = std::fs::remove_file(p);
            }
            return Ok(format!("nothing recorded; {} removed", self.path.display()));
        }
        Ok(format!(
            "{} samples ({} seen), {} regions, {} lost to full rings, {} dropped by the buffer -> {}",
            totals.samples,
            self.samples_seen.load(Ordering::Relaxed),
            totals.regions,
            lost,
            buffer_stats.records_dropped,
            self.path.display()
        ))
    }
}

impl SampleSink for Recorder {
    fn deliver(&self, sample: &Sample<'_>) {
        self.samples_seen.fetch_add(1, Ordering::Relaxed);
        let head = SampleRecord {
            timestamp_ns: sample.timestamp_ns,
            tid: sample.tid as u32,
            cpu: u32::MAX,
            frame_count: sample.frames.len() as u32,
            flags: if sample.complete { 0 } else { 2 },
            cpu_time_ns: sample.cpu_time_ns,
            peak_rss_kb: sample.peak_rss_kb,
        };
        let op = match sample.clock {
            TimerClock::ThreadCpu => 0,
            TimerClock::Realtime => 1,
        };
        strobe_buffer::emit_sample(op, &head, sample.frames);
    }
}

/// See [`Recorder::hold_for_fork`].
pub struct ForkGuard<'a>(#[allow(dead_code)] MutexGuard<'a, WriterState>);

/// The writer and what it needs to turn records into rows.
struct WriterState {
    writer: Option<Writer>,
    threads: HashMap<u32, (ThreadRef, TrackId)>,
    /// Threads named through the user API (their name is kept at exit).
    named: std::collections::HashSet<u32>,
    /// Executable ranges of known modules: (start, end, bias, id).
    modules: Vec<(u64, u64, u64, ModuleId)>,
    known: Vec<ModuleInfo>,
    generation: u64,
    /// Open begin/end pairs: (tid, unique id, instance) → (start, depth).
    open: HashMap<(u32, u64, u64), (u64, u32)>,
    depth: HashMap<u32, u32>,
    names: HashMap<u64, StringId>,
    categories: HashMap<&'static str, StringId>,
    frames: Vec<StackFrame>,
    /// Counters written from the samples' metrics.
    rss_counter: Option<CounterId>,
    cpu_counter: Option<CounterId>,
    last_rss_kb: u64,
    /// Last thread CPU-time counter sample per thread (timestamp).
    last_cpu_write: HashMap<u32, u64>,
    error: Option<String>,
}

/// Thread CPU time is written at most this often per thread.
const CPU_COUNTER_INTERVAL_NS: u64 = 100_000_000;

impl WriterState {
    fn new(writer: Writer) -> WriterState {
        WriterState {
            writer: Some(writer),
            threads: HashMap::new(),
            named: Default::default(),
            modules: Vec::new(),
            known: Vec::new(),
            generation: 0,
            open: HashMap::new(),
            depth: HashMap::new(),
            names: HashMap::new(),
            categories: HashMap::new(),
            frames: Vec::new(),
            rss_counter: None,
            cpu_counter: None,
            last_rss_kb: 0,
            last_cpu_write: HashMap::new(),
            error: None,
        }
    }

    fn fail(&mut self, e: impl std::fmt::Display) {
        if self.error.is_none() {
            let text = e.to_string();
            crate::log::emit(&format!("cannot write the profile: {text}"));
            self.error = Some(text);
        }
    }

    fn deliver(&mut self, d: &Delivery<'_>) {
        if self.writer.is_none() {
            return;
        }
        for r in d.records {
            if let Err(e) = self.record(r) {
                self.fail(e);
            }
        }
    }

    fn record(&mut self, r: &RecordHeader) -> Result<(), strobe_db::DbError> {
        if let Some(sample) = r.payload_as::<SampleRecord>() {
            return self.sample(sample, r.sample_frames());
        }
        if let Some(x) = r.payload_as::<XptiRecord>() {
            return self.xpti(x);
        }
        Ok(())
    }

    fn thread(
        &mut self,
        tid: u32,
        start: Option<u64>,
    ) -> Result<(ThreadRef, TrackId), strobe_db::DbError> {
        if let Some(t) = self.threads.get(&tid) {
            return Ok(*t);
        }
        let writer = self.writer.as_mut().expect("writer open");
        let thread = writer.add_thread(&ThreadInfo {
            tid,
            name: None,
            start_ns: start,
        })?;
        let track = writer.add_track(Some(thread), "samples")?;
        self.threads.insert(tid, (thread, track));
        Ok((thread, track))
    }

    fn apply_notes(&mut self, notes: Vec<ThreadNote>) {
        if self.writer.is_none() {
            return;
        }
        for note in notes {
            let result = match note {
                ThreadNote::Started { tid, at } => self.thread(tid as u32, Some(at)).map(|_| ()),
                ThreadNote::Named { tid, name } => self.name_thread(tid as u32, &name),
                ThreadNote::Ended { tid, name, at } => self.end_thread(tid as u32, &name, at),
            };
            if let Err(e) = result {
                self.fail(e);
            }
        }
    }

    fn name_thread(&mut self, tid: u32, name: &str) -> Result<(), strobe_db::DbError> {
        let (thread, _) = self.thread(tid, None)?;
        self.named.insert(tid);
        self.writer
            .as_mut()
            .expect("writer open")
            .set_thread_name(thread, name)
    }

    fn end_thread(&mut self, tid: u32, name: &str, at: u64) -> Result<(), strobe_db::DbError> {
        let (thread, _) = self.thread(tid, None)?;
        if !name.is_empty() && !self.named.contains(&tid) {
            self.writer
                .as_mut()
                .expect("writer open")
                .set_thread_name(thread, name)?;
        }
        self.writer
            .as_mut()
            .expect("writer open")
            .end_thread(thread, at)
    }

    /// Maps an address to (module, pc relative to the module's load bias).
    fn locate(&mut self, pc: u64) -> Result<(Option<ModuleId>, u64), strobe_db::DbError> {
        if let Some(hit) = self.find(pc) {
            return Ok(hit);
        }
        let generation = strobe_sampler::snapshot::with_snapshot(|s| s.generation).unwrap_or(0);
        if generation != self.generation {
            self.generation = generation;
            for m in strobe_sampler::snapshot::modules_seen() {
                self.add_module(m)?;
            }
            if let Some(hit) = self.find(pc) {
                return Ok(hit);
            }
        }
        Ok((None, pc))
    }

    fn find(&self, pc: u64) -> Option<(Option<ModuleId>, u64)> {
        let i = self
            .modules
            .partition_point(|&(start, _, _, _)| start <= pc);
        let (_, end, bias, id) = *self.modules.get(i.checked_sub(1)?)?;
        (pc < end).then(|| (Some(id), pc - bias))
    }

    fn add_module(&mut self, m: ModuleInfo) -> Result<(), strobe_db::DbError> {
        if self.known.contains(&m) {
            return Ok(());
        }
        let build_id = m.build_id_hex();
        let id = self
            .writer
            .as_mut()
            .expect("writer open")
            .add_module(&DbModule {
                path: &m.path,
                build_id: (!build_id.is_empty()).then_some(build_id.as_str()),
                load_address: m.bias,
                size: m.mapped.end - m.mapped.start,
                file_offset: 0,
                load_ns: None,
            })?;
        // A reloaded library may reuse an address range: the newest wins.
        self.modules
            .retain(|&(s, e, _, _)| e <= m.text.start || s >= m.text.end);
        let at = self
            .modules
            .partition_point(|&(s, _, _, _)| s < m.text.start);
        self.modules
            .insert(at, (m.text.start, m.text.end, m.bias, id));
        self.known.push(m);
        Ok(())
    }

    fn record_all_modules(&mut self) {
        for m in strobe_sampler::snapshot::modules_seen() {
            if let Err(e) = self.add_module(m) {
                self.fail(e);
            }
        }
    }

    fn sample(&mut self, head: &SampleRecord, pcs: &[u64]) -> Result<(), strobe_db::DbError> {
        let (_, track) = self.thread(head.tid, None)?;
        let mut frames = std::mem::take(&mut self.frames);
        frames.clear();
        for (i, &pc) in pcs.iter().enumerate() {
            // Return addresses point after the call: look the caller up at
            // the call instruction.
            let at = if i == 0 { pc } else { pc.saturating_sub(1) };
            let (module, rel_pc) = self.locate(at)?;
            frames.push(StackFrame { module, rel_pc });
        }
        let result = self
            .writer
            .as_mut()
            .expect("writer open")
            .append_sample(track, head.timestamp_ns, &frames)
            .map(|_| ());
        self.frames = frames;
        result?;
        self.sample_metrics(head, track)
    }

    /// Peak RSS (when it grows) and the thread's CPU time (at most every
    /// 100 ms per thread) as counter series.
    fn sample_metrics(
        &mut self,
        head: &SampleRecord,
        track: TrackId,
    ) -> Result<(), strobe_db::DbError> {
        let writer = self.writer.as_mut().expect("writer open");
        if head.peak_rss_kb > self.last_rss_kb {
            self.last_rss_kb = head.peak_rss_kb;
            let counter = match self.rss_counter {
                Some(c) => c,
                None => *self.rss_counter.insert(writer.add_counter(&CounterInfo {
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
            writer.append_counter_sample(
                counter,
                None,
                head.timestamp_ns,
                head.peak_rss_kb as f64,
            )?;
        }
        let last = self.last_cpu_write.entry(head.tid).or_insert(0);
        if head.cpu_time_ns > 0 && head.timestamp_ns >= *last + CPU_COUNTER_INTERVAL_NS {
            *last = head.timestamp_ns;
            let counter = match self.cpu_counter {
                Some(c) => c,
                None => *self.cpu_counter.insert(writer.add_counter(&CounterInfo {
                    name: "thread_cpu_time",
                    description: Some("CPU time of the sampled thread (CLOCK_THREAD_CPUTIME_ID)"),
                    units: Some("ns"),
                    component: Some("sampler"),
                    accumulating: true,
                    expression: None,
                })?),
            };
            writer.append_counter_sample(
                counter,
                Some(track),
                head.timestamp_ns,
                head.cpu_time_ns as f64,
            )?;
        }
        Ok(())
    }

    fn name(&mut self, uid: u64) -> Result<StringId, strobe_db::DbError> {
        if let Some(id) = self.names.get(&uid) {
            return Ok(*id);
        }
        let name = strobe_trace::global()
            .query_payload(uid)
            .and_then(|p| p.name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| format!("event {uid}"));
        let id = self
            .writer
            .as_mut()
            .expect("writer open")
            .intern_string(&name)?;
        self.names.insert(uid, id);
        Ok(id)
    }

    fn category(&mut self, name: &'static str) -> Result<StringId, strobe_db::DbError> {
        if let Some(id) = self.categories.get(name) {
            return Ok(*id);
        }
        let id = self
            .writer
            .as_mut()
            .expect("writer open")
            .intern_string(name)?;
        self.categories.insert(name, id);
        Ok(id)
    }

    fn xpti(&mut self, x: &XptiRecord) -> Result<(), strobe_db::DbError> {
        let key = (x.tid, x.unique_id, x.instance);
        let kind = x.trace_type;
        if let Some(category) = span_category(kind & !1) {
            if kind & 1 == 0 {
                let depth = self.depth.entry(x.tid).or_insert(0);
                self.open.insert(key, (x.timestamp_ns, *depth));
                *depth += 1;
                return Ok(());
            }
            let Some((start, depth)) = self.open.remove(&key) else {
                return Ok(());
            };
            if let Some(d) = self.depth.get_mut(&x.tid) {
                *d = d.saturating_sub(1);
            }
            return self.region(
                x.tid,
                x.unique_id,
                category,
                start,
                x.timestamp_ns,
                depth,
                &[],
            );
        }
        // Everything else is an instant.
        let category = if kind == trace_point::SIGNAL {
            "marker"
        } else {
            "xpti"
        };
        self.region(
            x.tid,
            x.unique_id,
            category,
            x.timestamp_ns,
            x.timestamp_ns,
            0,
            &[],
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn region(
        &mut self,
        tid: u32,
        uid: u64,
        category: &'static str,
        start_ns: u64,
        end_ns: u64,
        depth: u32,
        args: &[Arg<'_>],
    ) -> Result<(), strobe_db::DbError> {
        let (thread, _) = self.thread(tid, None)?;
        let name = self.name(uid)?;
        let category = self.category(category)?;
        let depth_text = depth.to_string();
        let mut all = vec![Arg {
            name: "depth",
            ty: "int",
            value: &depth_text,
        }];
        all.extend_from_slice(args);
        self.writer
            .as_mut()
            .expect("writer open")
            .append_region(&Region {
                thread,
                start_ns,
                end_ns: end_ns.max(start_ns),
                name,
                category: Some(category),
                stack: None,
                correlation_id: None,
                args: &all,
            })?;
        Ok(())
    }

    /// Regions still open at the end close there.
    fn close_open_regions(&mut self, end_ns: u64) {
        let open: Vec<_> = self.open.drain().collect();
        for ((tid, uid, _), (start, depth)) in open {
            let unterminated = [Arg {
                name: "unterminated",
                ty: "bool",
                value: "true",
            }];
            if let Err(e) = self.region(tid, uid, "user", start, end_ns, depth, &unterminated) {
                self.fail(e);
            }
        }
    }

    fn commit(&mut self) {
        if let Some(w) = self.writer.as_mut() {
            if let Err(e) = w.flush() {
                self.fail(e);
            }
        }
    }
}

/// The region category of a begin/end trace-point pair, or `None` for
/// instants.
fn span_category(begin: u16) -> Option<&'static str> {
    Some(match begin {
        trace_point::REGION_BEGIN => "user",
        trace_point::TASK_BEGIN => "task",
        trace_point::BARRIER_BEGIN => "barrier",
        trace_point::LOCK_BEGIN => "lock",
        trace_point::TRANSFER_BEGIN => "transfer",
        trace_point::THREAD_BEGIN => "thread",
        trace_point::WAIT_BEGIN => "wait",
        trace_point::FUNCTION_BEGIN | trace_point::FUNCTION_WITH_ARGS_BEGIN => "function",
        trace_point::MEM_ALLOC_BEGIN | trace_point::MEM_RELEASE_BEGIN => "memory",
        b if b & 0x80 != 0 => "user_defined",
        _ => return None,
    })
}

/// Appends the database path to the launcher's session manifest (at open,
/// so that a process that crashes or is killed is still reported).
fn announce(path: &Path) {
    let Some(manifest) = std::env::var_os(SESSION_ENV) else {
        return;
    };
    let absolute = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let line = format!("{}\n", absolute.display());
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(manifest)
    {
        // One write of one short line: O_APPEND keeps lines of concurrent
        // processes whole.
        let _ = f.write_all(line.as_bytes());
    }
}

/// Request and acknowledgement eventfds of the ticker (−1 before it runs).
pub static EMERGENCY_REQUEST: AtomicI32 = AtomicI32::new(-1);
/// Written by the ticker when an emergency flush is done.
pub static EMERGENCY_DONE: AtomicI32 = AtomicI32::new(-1);

/// Asks the ticker to save what it has, from a signal handler, and waits at
/// most one second. **Signal handler**: `write` and `poll` only.
pub fn emergency_flush() {
    let request = EMERGENCY_REQUEST.load(Ordering::SeqCst);
    let done = EMERGENCY_DONE.load(Ordering::SeqCst);
    if request < 0 || done < 0 {
        return;
    }
    let one: u64 = 1;
    // SAFETY: write(2) of 8 bytes to an eventfd; async-signal-safe.
    unsafe { libc::write(request, &one as *const u64 as *const libc::c_void, 8) };
    let mut pfd = libc::pollfd {
        fd: done,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll(2) on one valid pollfd; async-signal-safe.
    unsafe { libc::poll(&mut pfd, 1, 1000) };
}
