//! One process image of the run, as the writer records it: what its
//! records said so far, and its database once it recorded something.
//!
//! Owns decoding the records the collector thread copied out of the rings
//! ([`Batch`]) into the database, the samples' weights (timer
//! expirations spread over a thread's samples, see [`TimerWeights`]), the
//! kernel's samples of the process (and those taken before its runtime
//! announced itself, [`Process::continue_from`]), and finishing: run
//! totals and notes into the database, an empty profile removed. Never reads the
//! rings (the collector thread does) and never trusts a record beyond the
//! wire checks.

use crate::batch::Batch;
use crate::described::{describe, sample_counters, Described};
use crate::profile::{Module, Profile};
use crate::source::Source;
use crate::Options;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use strobe_core::clock::now_ns;
use strobe_db::{ProcessInfo, SampleKind, WriterOptions};
use strobe_wire::record::{counter_readings, decode_event, event, read, ModuleBody, XptiBody};
use strobe_wire::sample::{decode_sample, Sample, TimerClock};
use strobe_wire::segment::{slot_state, state, Segment};

/// The `strobe_settings` row that repeats the run's XPTI note (see
/// `Process::xpti_note`) for `strobe summary`.
pub const XPTI_NOTE: &str = "xpti.note";

/// File-name prefixes of the libraries that bring XPTI instrumentation
/// (and its proxy) into a program, most specific first.
const XPTI_LIBRARIES: &[&str] = &["libsycl", "libur_loader"];

/// Threads whose damaged rings are named one by one.
const CORRUPT_THREADS_NAMED: usize = 16;

/// The timer expirations of one thread's samples. A CPU-time timer the
/// kernel checks late (when the thread is not running at its ticks: more
/// threads than cores) fires once for several periods, at wherever the
/// thread is when the check comes: giving that sample all of them would
/// credit one place with time spent elsewhere (measured: 7.1 pp of error
/// on a worker's shares where counting samples alike gave 1.1 pp). So
/// every sample weighs one period while the run lasts, and at the end the
/// thread's samples are scaled alike to its expirations: shares within a
/// thread are those of its samples, its total is exact.
#[derive(Debug, Default, Clone, Copy)]
struct TimerWeights {
    samples: u64,
    expirations: u64,
    /// The last sample's time (the kernel's samples of a thread handed
    /// over later are not the timer's).
    last_ns: u64,
}

impl TimerWeights {
    /// The weight of the next sample of a `period_ns` timer, which stands
    /// for `1 + overruns` expirations.
    fn weigh(&mut self, period_ns: u64, overruns: u32, at_ns: u64) -> u64 {
        self.samples += 1;
        self.last_ns = at_ns;
        self.expirations += 1 + u64::from(overruns);
        period_ns
    }
}

/// Thread `tid`'s CPU time so far (ns, the first field of
/// `/proc/PID/task/TID/schedstat`); 0 when it cannot be read.
fn thread_cpu_ns(pid: i32, tid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The kernel's name of thread `tid` of process `pid`, while it runs.
fn thread_comm(pid: i32, tid: i32) -> Option<String> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).ok()?;
    Some(comm.trim_end_matches('\n').to_string()).filter(|c| !c.is_empty())
}

/// One recorded process image.
pub struct Process {
    pub pid: i32,
    /// The runtime's segment (none for a process only the kernel samples).
    segment: Option<Arc<Segment>>,
    ppid: i32,
    start_ns: u64,
    described: Described,
    profile: Option<Profile>,
    modules: Vec<Module>,
    strings: HashMap<u32, String>,
    /// XPTI stream names by the id notifications carry.
    xpti_streams: HashMap<u32, String>,
    /// The runtime's `xptiTraceInit` ran (an XPTI dispatcher announced a
    /// stream).
    xpti_initialized: bool,
    /// A dispatcher announced a stream but the runtime could not find it:
    /// the stream and why.
    xpti_missing: Option<(String, String)>,
    /// Threads that started before the database was created: start and
    /// kernel name, by tid.
    thread_starts: HashMap<i32, (u64, String)>,
    notes: Vec<String>,
    /// Damaged rings: (thread, event ring?) → times found damaged.
    corrupt: BTreeMap<(i32, bool), u64>,
    /// Pages of code in no announced module already looked up in
    /// `/proc/PID/maps` (each is looked up once).
    looked_up: std::collections::HashSet<u64>,
    /// CPU time of every thread that ended, by tid.
    ended_cpu: HashMap<i32, u64>,
    /// Threads with at least one sample.
    sampled: std::collections::HashSet<i32>,
    /// Threads the kernel samples: their signal samples (once they unblock
    /// the signal) are left out, so no thread is sampled twice.
    kernel_tids: std::collections::HashSet<i32>,
    /// When `/proc/PID/maps` was last read (at most every 50 ms: code that
    /// is in no file, such as a JIT's, must not make the writer read it
    /// for every page).
    maps_read_ns: u64,
    last_commit: u64,
    /// Kernel samples: CPU time sampled per thread so far (the sum of its
    /// samples' weights), the process's peak RSS and when it was read.
    kernel_cpu: HashMap<i32, u64>,
    kernel_rss: (u64, u64),
    /// Signal samples: the timer expirations of each thread and clock,
    /// spread over its samples (see [`TimerWeights`]).
    timer_weights: HashMap<(i32, SampleKind), TimerWeights>,
    /// Counters of slots already freed: taken, lost (full), lost
    /// (nested), overruns, incomplete.
    totals: [u64; 6],
}

impl Process {
    /// Starts recording a process whose segment arrived.
    pub fn new(pid: i32, segment: Arc<Segment>) -> Process {
        let h = segment.header();
        let (ppid, start_ns) = (h.ppid, h.start_ns);
        Process {
            described: describe(&segment),
            segment: Some(segment),
            ..Process::bare(pid, ppid, start_ns)
        }
    }

    /// Starts recording a process only the kernel samples (no runtime in
    /// it), first seen at `start_ns`; described from `/proc` while it runs.
    pub fn kernel_only(pid: i32, start_ns: u64) -> Process {
        let ppid = crate::ancestry::stat(pid).map_or(0, |s| s.ppid);
        let args: Vec<String> = std::fs::read(format!("/proc/{pid}/cmdline"))
            .unwrap_or_default()
            .split(|&b| b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut p = Process::bare(pid, ppid, start_ns);
        p.described = Described {
            exe,
            args,
            env: Vec::new(),
            db_name: PathBuf::from(format!("{}/{pid}.db", strobe_core::output_path::hostname())),
            start_unix_ns: strobe_core::clock::ClockSnapshot::take()
                .monotonic_to_realtime(start_ns),
            warnings: Vec::new(),
        };
        p
    }

    fn bare(pid: i32, ppid: i32, start_ns: u64) -> Process {
        Process {
            pid,
            segment: None,
            ppid,
            start_ns,
            described: Described {
                exe: String::new(),
                args: Vec::new(),
                env: Vec::new(),
                db_name: PathBuf::from(format!("{pid}.db")),
                start_unix_ns: 0,
                warnings: Vec::new(),
            },
            profile: None,
            modules: Vec::new(),
            strings: HashMap::new(),
            xpti_streams: HashMap::new(),
            xpti_initialized: false,
            xpti_missing: None,
            thread_starts: HashMap::new(),
            notes: Vec::new(),
            corrupt: BTreeMap::new(),
            looked_up: std::collections::HashSet::new(),
            maps_read_ns: 0,
            ended_cpu: HashMap::new(),
            sampled: std::collections::HashSet::new(),
            kernel_tids: std::collections::HashSet::new(),
            last_commit: now_ns(),
            kernel_cpu: HashMap::new(),
            kernel_rss: (0, 0),
            timer_weights: HashMap::new(),
            totals: [0; 6],
        }
    }

    /// The runtime of a process the kernel already sampled announced
    /// itself: when `before` is the same image (same executable), what it
    /// recorded goes on in one database. Returns `before` otherwise (an
    /// earlier image, to be finished on its own).
    pub fn continue_from(&mut self, mut before: Process) -> Option<Process> {
        let same_file = |a: &str, b: &str| {
            !a.is_empty()
                && (a == b
                    || std::fs::canonicalize(a)
                        .is_ok_and(|x| std::fs::canonicalize(b).is_ok_and(|y| x == y)))
        };
        if self.profile.is_some() || !same_file(&before.described.exe, &self.described.exe) {
            return Some(before);
        }
        self.profile = before.profile.take();
        self.sampled.extend(before.sampled.drain());
        self.kernel_cpu.extend(before.kernel_cpu.drain());
        for (t, b) in self.totals.iter_mut().zip(before.totals) {
            *t = t.saturating_add(b);
        }
        self.notes.append(&mut before.notes);
        None
    }

    /// The command line, for messages.
    pub fn command(&self) -> String {
        self.described.command()
    }

    fn profile(&mut self, options: &Options) -> Option<&mut Profile> {
        if self.profile.is_none() {
            let process = ProcessInfo {
                pid: self.pid as u32,
                ppid: self.ppid as u32,
                init_ns: self.start_ns,
                start_ns: self.start_ns,
                start_unix_ns: self.described.start_unix_ns,
                command: self.command(),
                environment: self.described.env.clone(),
            };
            let dir = match options.run_dir.path() {
                Ok(dir) => dir,
                Err(e) => {
                    self.notes
                        .push(format!("cannot create the run directory: {e}"));
                    return None;
                }
            };
            let path = dir.join(&self.described.db_name);
            let writer_options = WriterOptions {
                flush_interval: options.flush_interval,
                settings: options.settings.clone(),
                ..WriterOptions::default()
            };
            match Profile::create(&path, &process, writer_options) {
                Ok(mut p) => {
                    if !options.counters.is_empty() {
                        p.use_counters(&options.counters, &options.metrics);
                    }
                    p.use_time_filter(options.time_filter_ns);
                    for (tid, (at, name)) in std::mem::take(&mut self.thread_starts) {
                        let r = p.thread_seen(tid, Some(at), &name);
                        p.note(r);
                    }
                    self.profile = Some(p);
                }
                Err(e) => {
                    self.notes
                        .push(format!("cannot write its profile {}: {e}", path.display()));
                    return None;
                }
            }
        }
        self.profile.as_mut()
    }

    /// Writes what the collector thread copied out of the rings.
    pub fn apply(&mut self, batch: Batch, options: &Options) {
        for (source, tid, range) in &batch.records {
            let payload = &batch.bytes[range.clone()];
            match source {
                Source::Events => {
                    if let Some(e) = decode_event(payload) {
                        let h = e.head;
                        self.event(*tid, h.kind, h.arg, h.timestamp_ns, e.bytes, options);
                    }
                }
                Source::Samples => {
                    let Some(sample) = decode_sample(payload) else {
                        continue;
                    };
                    if self.kernel_tids.contains(&sample.tid) {
                        continue;
                    }
                    self.find_unannounced_modules(sample.frames);
                    self.sampled.insert(sample.tid);
                    let modules = std::mem::take(&mut self.modules);
                    let (kind, timing) = match sample.clock {
                        TimerClock::ThreadCpu => (SampleKind::Cpu, &options.timing[0]),
                        TimerClock::Realtime => (SampleKind::Wall, &options.timing[1]),
                    };
                    let weight = self
                        .timer_weights
                        .entry((sample.tid, kind))
                        .or_default()
                        .weigh(timing.period_ns, sample.overruns, sample.timestamp_ns);
                    if let Some(profile) = self.profile(options) {
                        let r = profile.sample(&sample, kind, weight, &modules);
                        profile.note(r);
                    }
                    self.modules = modules;
                }
                Source::Kernel => {}
            }
        }
        if !batch.process_points.is_empty() {
            if let Some(profile) = self.profile(options) {
                for point in &batch.process_points {
                    let r = profile.process_point(point);
                    profile.note(r);
                }
            }
        }
        if !batch.causal.is_empty() || !batch.causal_samples.is_empty() {
            if let Some(profile) = self.profile(options) {
                let r = profile.causal(&batch.causal, &batch.causal_samples);
                profile.note(r);
            }
        }
        for (t, r) in self.totals.iter_mut().zip(batch.retired) {
            *t = t.saturating_add(r);
        }
        self.notes.extend(batch.notes);
        for (tid, source) in batch.corrupt {
            // Thread ids come from the segment: past a few, one count for
            // all (the map stays small whatever the program writes).
            let mut key = (tid, source == Source::Events);
            if self.corrupt.len() >= CORRUPT_THREADS_NAMED && !self.corrupt.contains_key(&key) {
                key.0 = -1;
            }
            let count = self.corrupt.entry(key).or_default();
            *count = count.saturating_add(1);
        }
        let now = now_ns();
        if now - self.last_commit >= options.flush_interval.as_nanos() as u64 {
            self.last_commit = now;
            if let Some(p) = &mut self.profile {
                p.commit();
            }
        }
    }

    /// From now on the kernel samples thread `tid`.
    pub fn sampled_by_kernel(&mut self, tid: i32) {
        self.kernel_tids.insert(tid);
    }

    /// Records one sample the kernel took, of `kind`, standing for
    /// `weight_ns`, unwound against `modules`.
    pub fn kernel_sample(
        &mut self,
        sample: &Sample<'_>,
        kind: SampleKind,
        weight_ns: u64,
        modules: &[Module],
        options: &Options,
    ) {
        self.totals[0] += 1;
        let first = self.sampled.insert(sample.tid);
        if !sample.complete {
            self.totals[4] += 1;
        }
        // The kernel reads neither: the thread's CPU time is what its
        // samples stand for so far, the peak RSS is read from /proc.
        let mut sample = *sample;
        if kind == SampleKind::Cpu {
            // From the thread's CPU time so far (schedstat), so a thread
            // handed over (or attached to) goes on from where it was.
            let pid = self.pid;
            let cpu = self
                .kernel_cpu
                .entry(sample.tid)
                .or_insert_with(|| thread_cpu_ns(pid, sample.tid).saturating_sub(weight_ns));
            *cpu += weight_ns;
            sample.cpu_time_ns = *cpu;
        }
        sample.peak_rss_kb = self.kernel_peak_rss();
        // No runtime names the threads of a process only the kernel
        // samples: their names are read while they run.
        let name = (first && self.segment.is_none())
            .then(|| thread_comm(self.pid, sample.tid))
            .flatten();
        if let Some(profile) = self.profile(options) {
            let r = profile.sample(&sample, kind, weight_ns, modules);
            profile.note(r);
            if let Some(name) = name {
                let r = profile.thread_seen(sample.tid, None, &name);
                profile.note(r);
            }
        }
    }

    /// The process's peak RSS (KiB, `VmHWM`), read at most every 100 ms.
    fn kernel_peak_rss(&mut self) -> u64 {
        let (peak, read_at) = &mut self.kernel_rss;
        let now = now_ns();
        if now.saturating_sub(*read_at) >= 100_000_000 {
            *read_at = now;
            let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid));
            let hwm = status.ok().and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmHWM:"))?
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            });
            *peak = (*peak).max(hwm.unwrap_or(0));
        }
        *peak
    }

    /// Looks up, in the running process's memory map, code addresses of
    /// `frames` that no announced module holds (a library `dlopen`ed since
    /// the runtime last looked).
    fn find_unannounced_modules(&mut self, frames: &[u64]) {
        for (i, &pc) in frames.iter().enumerate() {
            let at = if i == 0 { pc } else { pc.saturating_sub(1) };
            if self.modules.iter().any(|m| m.text.contains(&at))
                || self
                    .segment
                    .as_ref()
                    .is_some_and(|s| s.header().state.load(Ordering::Acquire) != state::RUNNING)
                || self.looked_up.contains(&(at >> 12))
                || now_ns().saturating_sub(self.maps_read_ns) < 50_000_000
            {
                continue;
            }
            self.looked_up.insert(at >> 12);
            self.maps_read_ns = now_ns();
            if let Some(m) = strobe_symbols::proc_maps::module_at(self.pid, at) {
                self.modules.push(m);
            }
        }
    }

    /// Applies one event record of thread `tid`: `kind`, its argument and
    /// its bytes, stamped `at`.
    fn event(&mut self, tid: i32, kind: u16, arg: u32, at: u64, bytes: &[u8], options: &Options) {
        let text = || String::from_utf8_lossy(bytes).into_owned();
        match kind {
            event::THREAD_START => self.thread_start(tid, at, text()),
            event::THREAD_END if bytes.len() >= 8 => self.thread_end(tid, at, bytes),
            event::THREAD_NAME => {
                if let Some(p) = self.profile(options) {
                    let r = p.name_thread(tid, &text());
                    p.note(r);
                }
            }
            event::STRING => {
                self.strings.insert(arg, text());
                if let Some(p) = &mut self.profile {
                    p.forget_runtime_text(arg);
                }
            }
            event::REGION_BEGIN | event::MARK => {
                self.region_begin_or_mark(tid, kind, arg, at, bytes, options)
            }
            event::REGION_END => {
                if let Some(p) = &mut self.profile {
                    let readings: Vec<_> = counter_readings(bytes).collect();
                    let r = p.region_end(tid, at, &readings);
                    p.note(r);
                }
            }
            event::NOTE => self.notes.push(text()),
            event::MPI_CALL => self.mpi_call(tid, at, bytes, options),
            event::MPI_CLOCK => self.mpi_clock(bytes, options),
            event::XPTI_STREAM => self.xpti_stream(arg, bytes),
            event::XPTI => self.xpti(tid, arg, at, bytes, options),
            event::MODULE => self.module(bytes),
            _ => {}
        }
    }

    /// A thread started: into the database, or remembered until there is one.
    fn thread_start(&mut self, tid: i32, at: u64, name: String) {
        match &mut self.profile {
            Some(p) => {
                let r = p.thread_seen(tid, Some(at), &name);
                p.note(r);
            }
            None => {
                self.thread_starts.insert(tid, (at, name));
            }
        }
    }

    /// A thread ended: its CPU time (the first 8 bytes) and its name.
    fn thread_end(&mut self, tid: i32, at: u64, bytes: &[u8]) {
        let cpu_ns = u64::from_le_bytes(bytes[..8].try_into().unwrap_or_default());
        self.ended_cpu.insert(tid, cpu_ns);
        let name = String::from_utf8_lossy(&bytes[8..]);
        if let Some(p) = &mut self.profile {
            let r = p.end_thread(tid, &name, at);
            p.note(r);
        }
    }

    /// A region began, or a marker (`kind`), named by string `arg`.
    fn region_begin_or_mark(
        &mut self,
        tid: i32,
        kind: u16,
        arg: u32,
        at: u64,
        bytes: &[u8],
        options: &Options,
    ) {
        if self.profile(options).is_none() {
            return;
        }
        let (strings, Some(p)) = (&self.strings, &mut self.profile) else {
            return;
        };
        let r = p
            .runtime_text(arg, || {
                strings
                    .get(&arg)
                    .cloned()
                    .unwrap_or_else(|| format!("string {arg}"))
            })
            .and_then(|name| {
                if kind == event::MARK {
                    p.mark(tid, name, at)
                } else {
                    p.region_begin(tid, name, at, counter_readings(bytes).collect())
                }
            });
        p.note(r);
    }

    /// An MPI call the wrappers saw.
    fn mpi_call(&mut self, tid: i32, at: u64, bytes: &[u8], options: &Options) {
        let Some(call) = crate::mpi::call(bytes) else {
            return;
        };
        if let Some(p) = self.profile(options) {
            let r = p.mpi_call(tid, &call, at);
            p.note(r);
        }
    }

    /// A comparison of this rank's clock with rank 0's.
    fn mpi_clock(&mut self, bytes: &[u8], options: &Options) {
        let Some((sync, rank, world_size)) = crate::mpi::clock(bytes) else {
            return;
        };
        let launched = options.settings.iter().any(|(k, _)| k == "mpi.rank");
        if let Some(p) = self.profile(options) {
            // MPI started without a launcher (a singleton): the
            // rank is known from MPI only.
            if !launched && sync.phase == "init" {
                p.setting("mpi.rank", &rank.to_string());
                p.setting("mpi.world_size", &world_size.to_string());
            }
            let r = p.clock_sync(&sync);
            p.note(r);
        }
    }

    /// An XPTI stream the runtime subscribed to (`arg`, its id), or (`arg`
    /// 0) the stream it could not subscribe to and why.
    fn xpti_stream(&mut self, arg: u32, bytes: &[u8]) {
        self.xpti_initialized = true;
        if arg == 0 {
            let (stream, why) = bytes
                .iter()
                .position(|&b| b == 0)
                .map_or((bytes, &[][..]), |i| (&bytes[..i], &bytes[i + 1..]));
            self.xpti_missing.get_or_insert((
                String::from_utf8_lossy(stream).into_owned(),
                String::from_utf8_lossy(why).into_owned(),
            ));
        } else {
            self.xpti_streams
                .insert(arg, String::from_utf8_lossy(bytes).into_owned());
        }
    }

    /// An XPTI notification, named by string `arg`.
    fn xpti(&mut self, tid: i32, arg: u32, at: u64, bytes: &[u8], options: &Options) {
        let Some(x) = read::<XptiBody>(bytes) else {
            return;
        };
        let name = match self.strings.get(&arg) {
            Some(text) if arg != 0 => text.clone(),
            _ => format!("event {}", x.unique_id),
        };
        let counters = counter_readings(&bytes[std::mem::size_of::<XptiBody>()..]);
        let counters = counters.collect();
        let stream = self.xpti_streams.get(&x.stream_id).cloned();
        if let Some(p) = self.profile(options) {
            let r = p.xpti(
                tid,
                x.trace_type,
                x.unique_id,
                x.instance,
                &name,
                stream.as_deref(),
                at,
                counters,
            );
            p.note(r);
        }
    }

    /// A module the runtime announced, kept once.
    fn module(&mut self, bytes: &[u8]) {
        // A module that ends before it starts, or whose code lies
        // below its load bias, is no module.
        let Some(m) = read::<ModuleBody>(bytes).filter(|m| {
            m.bias <= m.text_start && m.text_start <= m.text_end && m.mapped_start <= m.mapped_end
        }) else {
            return;
        };
        let rest = &bytes[std::mem::size_of::<ModuleBody>()..];
        let id_len = (m.build_id_len as usize).min(rest.len());
        let module = Module {
            build_id: rest[..id_len].iter().map(|b| format!("{b:02x}")).collect(),
            path: String::from_utf8_lossy(&rest[id_len..]).into_owned(),
            bias: m.bias,
            text: m.text_start..m.text_end,
            mapped: m.mapped_start..m.mapped_end,
        };
        if !self.modules.contains(&module) {
            self.modules.push(module);
        }
    }

    /// What the run's report says about XPTI in this process, when the
    /// `xpti` setting asked for its notifications and none could be
    /// recorded: the dispatcher the runtime could not find, or an
    /// XPTI-instrumented library loaded while the runtime's `xptiTraceInit`
    /// never ran.
    fn xpti_note(&self, options: &Options) -> Option<String> {
        let setting = |name: &str| {
            options
                .settings
                .iter()
                .any(|(k, v)| k == name && v == "true")
        };
        let wanted = setting("xpti") && setting("use_tracing");
        if !wanted || self.segment.is_none() {
            return None;
        }
        if let Some((stream, why)) = self
            .xpti_missing
            .as_ref()
            .filter(|_| self.xpti_streams.is_empty())
        {
            return Some(format!(
                "the XPTI dispatcher that announced stream `{stream}` could not be found \
                 ({why}), so no XPTI notifications were recorded"
            ));
        }
        if self.xpti_initialized {
            return None;
        }
        let library = XPTI_LIBRARIES.iter().find_map(|prefix| {
            self.modules.iter().find_map(|m| {
                let file = std::path::Path::new(&m.path).file_name()?.to_str()?;
                file.starts_with(prefix).then(|| file.to_string())
            })
        })?;
        if !self.runtime_subscribes() {
            return Some(format!(
                "{library} was loaded with the xpti setting on, but XPTI_SUBSCRIBERS does not \
                 name strobe's runtime here, so no XPTI notifications were recorded \
                 (`strobe sample --xpti` sets it; a program preloaded without the launcher \
                 needs XPTI_TRACE_ENABLE=1, XPTI_FRAMEWORK_DISPATCHER and XPTI_SUBSCRIBERS set \
                 to the runtime's path)"
            ));
        }
        Some(format!(
            "the XPTI dispatcher was not initialized by {library} (its proxy unloads a \
             dispatcher that lacks a function it needs), so no XPTI notifications were recorded"
        ))
    }

    /// Whether the process's `XPTI_SUBSCRIBERS` names strobe's runtime (an
    /// entry it also preloads, or one named like it).
    fn runtime_subscribes(&self) -> bool {
        let env = |name: &str| {
            self.described
                .env
                .iter()
                .find(|(k, _)| k == name)
                .map_or("", |(_, v)| v.as_str())
        };
        let preloaded: Vec<&str> = env("LD_PRELOAD")
            .split([':', ' '])
            .filter(|p| !p.is_empty())
            .collect();
        env("XPTI_SUBSCRIBERS")
            .split(',')
            .map(str::trim)
            .any(|s| !s.is_empty() && (preloaded.contains(&s) || s.contains("strobe_runtime")))
    }

    /// The runtime's end-of-run figures: exhausted slots, dropped events
    /// and waits (returned), counters of slots still held. (An image
    /// without the runtime that replaced this one is the collector
    /// thread's to report.)
    fn runtime_totals(&mut self, segment: &Segment) -> (u64, u64, u64) {
        let h = segment.header();
        let exhausted = h.slots_exhausted.load(Ordering::Relaxed);
        let dropped = h.events_dropped.load(Ordering::Relaxed);
        let waits = h.event_waits.load(Ordering::Relaxed);
        let wait_ns = h.event_wait_ns.load(Ordering::Relaxed);
        if exhausted > 0 {
            self.notes.push(format!(
                "{exhausted} threads were not profiled: more than {} threads were alive at once",
                segment.layout().slots
            ));
        }
        if dropped > 0 {
            self.notes.push(format!(
                "{dropped} region/marker/tracing records were dropped"
            ));
        }
        for i in 0..segment.slots_in_use() {
            if segment.slot(i).state.load(Ordering::Acquire) != slot_state::FREE {
                for (t, c) in self.totals.iter_mut().zip(sample_counters(segment, i)) {
                    *t = t.saturating_add(c);
                }
            }
        }
        (dropped, waits, wait_ns)
    }

    /// Totals and notes; closes or removes the database. Returns the
    /// database path (if one is kept) and the notes for the run summary.
    /// The collector thread copied the rings for the last time before.
    pub fn finish(mut self, options: &Options) -> (Option<PathBuf>, Vec<String>) {
        let (mut dropped, mut waits, mut wait_ns) = (0, 0, 0);
        if let Some(segment) = self.segment.clone() {
            (dropped, waits, wait_ns) = self.runtime_totals(&segment);
        }
        for w in self.described.warnings.clone() {
            self.notes.push(w);
        }
        for (&(tid, events), &times) in &self.corrupt {
            let thread = if tid == -1 {
                "other threads".to_string()
            } else {
                format!("thread {tid}")
            };
            let ring = if events { "event" } else { "sample" };
            self.notes.push(format!(
                "{thread}: its {ring} ring was found damaged {times} time(s); what it held then \
                 was skipped, the rest of the run kept"
            ));
        }
        let xpti_note = self.xpti_note(options);
        self.notes.extend(xpti_note.clone());
        let unsampled: Vec<u64> = self
            .ended_cpu
            .iter()
            .filter(|(tid, cpu)| **cpu > 0 && !self.sampled.contains(tid))
            .map(|(_, cpu)| *cpu)
            .collect();
        // Only where the runtime's CPU-time sampler ran at all.
        let cpu_sampler = self
            .segment
            .as_ref()
            .is_some_and(|s| s.header().signals[0].load(Ordering::Relaxed) != 0);
        if !unsampled.is_empty() && cpu_sampler {
            self.notes.push(format!(
                "{} threads ended before their first sample: {:.1} ms of CPU time not sampled \
                 (`--sampler kernel` samples from the first nanosecond)",
                unsampled.len(),
                unsampled.iter().fold(0u64, |a, &c| a.saturating_add(c)) as f64 / 1e6
            ));
        }
        let needs_file = !self.notes.is_empty();
        if needs_file {
            let _ = self.profile(options);
        }
        let Some(mut profile) = self.profile.take() else {
            return (None, self.notes);
        };
        let end = now_ns();
        profile.close_open_regions(end);
        for m in &self.modules {
            let r = profile.add_module(m);
            profile.note(r);
        }
        let factors: Vec<_> = self
            .timer_weights
            .iter()
            .filter(|(_, w)| w.expirations > w.samples)
            .map(|(&(tid, kind), w)| (tid, kind, w.last_ns, w.expirations, w.samples))
            .collect();
        let r = profile.scale_weights(&factors);
        profile.note(r);
        let t = self.totals;
        for (name, value) in [
            ("sampler.samples_taken", t[0]),
            (
                "sampler.samples_lost",
                t[1].saturating_add(t[2]).saturating_add(t[5]),
            ),
            ("sampler.samples_lost_on_alternate_stack", t[5]),
            ("sampler.timer_overruns", t[3]),
            ("sampler.incomplete_stacks", t[4]),
            ("buffer.records_dropped", dropped),
            ("collector.event_waits", waits),
            ("collector.event_wait_ns", wait_ns),
        ] {
            profile.setting(name, &value.to_string());
        }
        for (i, note) in self.notes.iter().enumerate() {
            profile.setting(&format!("not_profiled.{i}"), note);
        }
        if let Some(note) = &xpti_note {
            profile.setting(XPTI_NOTE, note);
        }
        if let Some(e) = &profile.error {
            self.notes
                .push(format!("some records could not be written: {e}"));
        }
        let rows = profile.rows;
        let path = profile.path().to_path_buf();
        match profile.finish(end) {
            Ok(_) if rows == 0 && !needs_file => {
                // A process that recorded nothing (a shell forked just to
                // exec, say) leaves no database behind.
                let _ = std::fs::remove_file(&path);
                (None, self.notes)
            }
            Ok(_) => (Some(path), self.notes),
            Err(e) => {
                self.notes
                    .push(format!("cannot finish {}: {e}", path.display()));
                (Some(path), self.notes)
            }
        }
    }
}

#[cfg(test)]
mod tests;
