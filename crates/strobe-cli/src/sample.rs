//! `strobe sample -- <command> <args>`: run a program under the sampling
//! runtime and report where its time went.
//!
//! Owns the launcher's sequence: resolve settings (nothing starts if one is
//! invalid), find the runtime, run the program with the settings carried in
//! `STROBE_*` variables and the runtime in `LD_PRELOAD` (with `--xpti`, the
//! XPTI variables too: see `xpti_env`), then collect the databases its
//! processes wrote. Exits with the program's status.

use crate::launch::{exit_code, run, signal_name, Outcome};
use crate::runtime_lib;
use crate::setting_flags::{load_settings, SettingFlags};
use anyhow::{Context, Result};
use clap::Args;
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use strobe_core::settings::{Key, Settings};
use strobe_wire::config::{RuntimeConfig, COLLECTOR_ENV, CONFIG_ENV};
use strobe_wire::segment::{exec_reason, Layout};

/// Options of `strobe sample`.
#[derive(Debug, Args)]
pub struct SampleArgs {
    /// Do not print the summary after the run.
    #[arg(long, short)]
    quiet: bool,

    /// Rows per table in the summary after the run.
    #[arg(long, default_value_t = 10, value_name = "N")]
    top: usize,

    /// Also resolve source files and lines (reads DWARF debug info; slower
    /// and memory-hungry for large binaries). Function names are always
    /// resolved.
    #[arg(long)]
    lines: bool,

    /// Leave frames unnamed (module+offset).
    #[arg(long)]
    no_symbols: bool,

    /// Also write folded stacks and an SVG flamegraph of the run into the
    /// output directory (`strobe convert -f folded,svg`).
    #[arg(long)]
    flamegraph: bool,

    /// Also convert the run to these formats (pftrace, json, folded, svg,
    /// pprof, firefox, csv; comma-separated) into the output directory.
    #[arg(long = "format", value_delimiter = ',', value_name = "FORMAT")]
    formats: Vec<String>,

    /// Counters read on every thread of the program around each region and
    /// with each sample (comma-separated, repeatable; as `strobe stat -e`
    /// takes them: task-clock, page-faults, cycles, ...): stored per region
    /// and per sample. Same as --sampling-events.
    #[arg(short = 'e', long = "event", value_name = "EVENTS")]
    events: Vec<String>,

    /// Derived metrics (comma-separated, repeatable; built in, or defined in
    /// the file in STROBE_METRICS) computed per region and per function
    /// from the counters, which are read too. Same as --sampling-metrics.
    #[arg(short = 'M', long = "metrics", value_name = "METRICS")]
    metrics: Vec<String>,

    #[command(flatten)]
    flags: SettingFlags,

    /// Attach to the running process PID instead of starting a program:
    /// kernel sampling of all its threads (nothing is preloaded), until it
    /// exits, Ctrl-C or `--duration`.
    #[arg(long, value_name = "PID", conflicts_with = "command")]
    pid: Option<i32>,

    /// With `--pid`: stop after this long (`10s`, `500ms`, …); the process
    /// keeps running.
    #[arg(long, value_name = "DURATION", requires = "pid", value_parser = parse_duration)]
    duration: Option<Duration>,

    /// The program to profile and its arguments (`--` before it is
    /// optional; everything from the program's name on is the program's).
    #[arg(
        trailing_var_arg = true,
        required_unless_present = "pid",
        value_name = "COMMAND"
    )]
    command: Vec<OsString>,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    strobe_core::duration::parse_duration_ns(text)
        .map(Duration::from_nanos)
        .map_err(|e| e.to_string())
}

impl SampleArgs {
    /// What the run is named after: the command, or the attached process.
    fn run_name(&self) -> String {
        match (&self.command.first(), self.pid) {
            (Some(c), _) => c.to_string_lossy().into_owned(),
            (None, Some(pid)) => crate::run_dir::program_name(pid),
            (None, None) => "profile".into(),
        }
    }
}

/// What a finished session produced.
pub struct Session {
    /// The program's exit code for strobe to return.
    pub exit_code: i32,
    /// Every database written by the program's processes.
    pub databases: Vec<PathBuf>,
    /// Where they were written.
    pub output_dir: PathBuf,
    /// strobe set `PYTHONPERFSUPPORT` for the program: the perf maps it
    /// caused are deleted after symbolization.
    pub python_perf: bool,
}

/// CPython's switch for its perf trampoline and map (3.12 and newer).
const PYTHON_PERF_ENV: &str = "PYTHONPERFSUPPORT";

/// Runs `strobe sample`; returns strobe's exit code.
pub fn run_sample(args: &SampleArgs, config: Option<&Path>) -> Result<i32> {
    let session = launch(args, config)?;
    // Each once (an image that exec'd may be reported again by the next).
    let mut databases: Vec<PathBuf> = session
        .databases
        .iter()
        .filter(|p| p.is_file())
        .cloned()
        .collect();
    databases.sort();
    databases.dedup();
    if !args.no_symbols {
        for db in &databases {
            if let Err(e) = crate::symbolize::symbolize_database(db, args.lines) {
                say!("strobe: warning: cannot symbolize {}: {e:#}", db.display());
            } else if session.python_perf {
                crate::symbolize::remove_perf_map(db);
            }
        }
    }
    if !args.quiet && !databases.is_empty() {
        report(args, &databases);
    }
    if !args.quiet {
        for db in &databases {
            say!("strobe: wrote {}", db.display());
        }
    }
    if databases.is_empty() {
        eprintln!("strobe: no process recorded anything: no database was written");
    }
    let mut formats = args.formats.clone();
    if args.flamegraph {
        formats.extend(["folded".to_string(), "svg".to_string()]);
    }
    if !formats.is_empty() && !databases.is_empty() {
        let run_name = args.run_name();
        let name = Path::new(&run_name).file_name().map_or_else(
            || "profile".to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let convert = crate::convert::ConvertArgs {
            inputs: databases.iter().map(|p| p.display().to_string()).collect(),
            formats,
            output: Some(name),
            dir: session.output_dir.clone(),
            start: None,
            end: None,
            start_marker: None,
            end_marker: None,
            per_thread: false,
            per_process: false,
            off_cpu: false,
            diff: None,
        };
        if let Err(e) = crate::convert::run(convert) {
            say!("strobe: error: converting the run: {e:#}");
            if session.exit_code == 0 {
                return Ok(1);
            }
        }
    }
    Ok(session.exit_code)
}

/// Prints the summary tables of the run to stderr (stdout belongs to the
/// program).
fn report(args: &SampleArgs, databases: &[PathBuf]) {
    let summary = crate::summary_args::SummaryArgs {
        inputs: databases.iter().map(|p| p.display().to_string()).collect(),
        format: crate::summary_args::SummaryFormat::Table,
        report: crate::summary_args::Report::All,
        limit: args.top,
        wide: false,
        merge_runs: false,
        by_process: databases.len() > 1,
        start: None,
        end: None,
        without_notes: true,
    };
    let mut text = Vec::new();
    match crate::summary::render(&summary, &mut text) {
        Ok(()) => eprint!("{}", String::from_utf8_lossy(&text)),
        Err(e) => say!("strobe: warning: cannot summarize the run: {e:#}"),
    }
    let totals = sampler_totals(databases);
    eprintln!(
        "\nsamples: {} recorded, {} lost (full rings, nested signals, or a program handler's alternate stack), {} timer expirations merged by the kernel, {} stacks cut short",
        totals[0], totals[1], totals[2], totals[3]
    );
}

/// Sample totals summed over the databases: samples recorded (counted in
/// the database, so right after any death), then the runtime's counters
/// from `strobe_settings`: lost, timer overruns, incomplete stacks.
fn sampler_totals(databases: &[PathBuf]) -> [u64; 4] {
    let names = [
        "sampler.samples_lost",
        "sampler.timer_overruns",
        "sampler.incomplete_stacks",
    ];
    let mut totals = [0u64; 4];
    for db in databases {
        let Ok(p) = strobe_db::Profile::open(&[db.display().to_string()]) else {
            continue;
        };
        totals[0] += p.stored_samples().unwrap_or(0);
        for (i, name) in names.iter().enumerate() {
            let value = p.setting(name).ok().flatten();
            totals[i + 1] += value.and_then(|v| v.parse().ok()).unwrap_or(0);
        }
    }
    totals
}

/// The runtime's configuration from the resolved settings.
/// `kernel_samples_all`: the kernel samples every process of the run, so
/// the runtime's own sampler stays off (a thread is never sampled twice).
/// `counters`: what [`counter_setup`] resolved.
pub fn runtime_config(
    settings: &Settings,
    kernel_samples_all: bool,
    counters: &CounterSetup,
) -> RuntimeConfig {
    let sampling = settings.bool(Key::UseSampling) && !kernel_samples_all;
    let rate = |on: Key, freq: Key| {
        if sampling && settings.bool(on) {
            settings.float(freq)
        } else {
            0.0
        }
    };
    let ring = (settings.int(Key::SamplingBufferSamples) as u64 * 64)
        .next_power_of_two()
        .clamp(4096, 1 << 26) as u32;
    let defaults = RuntimeConfig::default();
    RuntimeConfig {
        cputime_hz: rate(Key::SamplingCputime, Key::SamplingCputimeFreq),
        cputime_signal: settings.int(Key::SamplingCputimeSignal) as i32,
        realtime_hz: rate(Key::SamplingRealtime, Key::SamplingRealtimeFreq),
        realtime_signal: settings.int(Key::SamplingRealtimeSignal) as i32,
        max_depth: settings.int(Key::SamplingDepth) as u32,
        layout: Layout {
            sample_ring_bytes: ring,
            ..defaults.layout
        },
        tracing: settings.bool(Key::UseTracing),
        lossless: settings.text(Key::BufferPolicy) != "discard",
        fork_follow: settings.text(Key::ForkMode) == "follow",
        verbose: settings.int(Key::Verbose) as i32,
        output_file: settings.text(Key::OutputFile).to_string(),
        tsc: strobe_core::clock::tsc_is_reliable(),
        counters: counters.counters.iter().map(|c| c.name.clone()).collect(),
        sampling_at_start: [Key::SamplingCputimeDelay, Key::SamplingRealtimeDelay].map(|delay| {
            settings.duration_ns(delay) == 0 && settings.windows(Key::TracePeriods).specs.is_empty()
        }),
        ..defaults
    }
}

/// The collector's options from the resolved settings and what
/// [`counter_setup`] resolved.
pub fn collector_options(
    settings: &Settings,
    run_dir: Arc<strobe_collect::RunDir>,
    kernel_samples_all: bool,
    counters: &CounterSetup,
) -> strobe_collect::Options {
    let timing = |freq: Key, delay: Key, duration: Key| strobe_collect::Timing {
        delay_ns: settings.duration_ns(delay),
        duration_ns: settings.duration_ns(duration),
        period_ns: (1e9 / settings.float(freq).max(1e-3)).round() as u64,
    };
    strobe_collect::Options {
        run_root: std::process::id() as i32,
        run_dir,
        flush_interval: Duration::from_nanos(settings.duration_ns(Key::FlushInterval).max(1)),
        timing: [
            timing(
                Key::SamplingCputimeFreq,
                Key::SamplingCputimeDelay,
                Key::SamplingCputimeDuration,
            ),
            timing(
                Key::SamplingRealtimeFreq,
                Key::SamplingRealtimeDelay,
                Key::SamplingRealtimeDuration,
            ),
        ],
        windows: settings.windows(Key::TracePeriods).clone(),
        counters: counters.counters.clone(),
        metrics: counters.metrics.clone(),
        process_sampling_hz: settings.float(Key::ProcessSamplingFreq),
        time_filter_ns: settings.duration_ns(Key::TraceTimeFilter),
        causal: None,
        settings: settings
            .iter()
            .filter_map(|(def, r)| Some((def.name.to_string(), r.value.as_ref()?.to_string())))
            .chain(strobe_core::mpi_job::MpiJob::current().map_or_else(Vec::new, |j| j.settings()))
            .collect(),
        poll_interval: Duration::from_millis(5),
        max_depth: settings.int(Key::SamplingDepth) as usize,
        kernel_for_all: kernel_samples_all,
        kernel_threads: (settings.text(Key::Sampler) == "auto"
            && settings.bool(Key::UseSampling)
            && settings.bool(Key::SamplingCputime))
        .then(|| strobe_collect::KernelThreads {
            freq_hz: settings.float(Key::SamplingCputimeFreq).round().max(1.0) as u64,
            stack_bytes: settings.int(Key::SamplingStackBytes) as u32 & !7,
        }),
    }
}

/// `strobe sample --pid PID`: kernel sampling of a running process until
/// it ends, the user interrupts or `--duration` passes.
fn attach(args: &SampleArgs, settings: &Settings, pid: i32) -> Result<Session> {
    let pidfd = strobe_core::pidfd::open(pid)
        .map_err(|e| anyhow::anyhow!("cannot attach to process {pid}: {e}"))?;
    let output_dir = output_dir(settings)?;
    let hz = settings.float(Key::SamplingCputimeFreq).round().max(1.0) as u64;
    let stack = settings.int(Key::SamplingStackBytes) as u32 & !7;
    let off_cpu = settings.bool(Key::SamplingOffCpu);
    let events = strobe_collect::KernelEvents::for_process(pid, hz, stack, 128, off_cpu)
        .with_context(|| format!("cannot sample process {pid}"))?;
    let mut notes = Vec::new();
    note_system_calls(&mut notes);
    notes.extend(events.off_cpu_refused.clone());
    for note in &notes {
        say!("strobe: {note}");
    }
    // Nothing is preloaded into an attached process: no counters.
    let options = collector_options(
        settings,
        lazy_run_dir(output_dir, args.run_name()),
        true,
        &CounterSetup::default(),
    );
    let collector = strobe_collect::Collector::start(options)?;
    collector.sample_kernel(events, true);
    crate::launch::install_forwarding();
    let started = std::time::Instant::now();
    loop {
        let ended = strobe_core::pidfd::ended(&pidfd, 50);
        let over = args.duration.is_some_and(|d| started.elapsed() >= d);
        if ended || over || crate::launch::interrupted() {
            break;
        }
    }
    let databases = finish_collecting(collector);
    let output_dir = databases
        .first()
        .and_then(|d| d.parent()?.parent().map(Path::to_path_buf))
        .unwrap_or_default();
    Ok(Session {
        exit_code: 0,
        databases,
        output_dir,
        python_perf: false,
    })
}

/// Says when the kernel's samples leave out CPU time in system calls.
fn note_system_calls(notes: &mut Vec<String>) {
    if !strobe_collect::kernel_sees_system_calls() {
        notes.push(
            "kernel sampling does not see CPU time spent in system calls here \
             (kernel.perf_event_paranoid is 2 or more and strobe has no CAP_PERFMON)"
                .into(),
        );
    }
}

/// Opens the kernel's sampling events for the program about to be
/// started, when the `sampler` setting asks for them (`kernel`, or `auto`
/// for a program nothing can be preloaded into). Must run on the thread
/// that starts the program, just before. A note says what happens.
fn kernel_events(
    settings: &Settings,
    unprofilable: Option<u32>,
    notes: &mut Vec<String>,
) -> Option<strobe_collect::KernelEvents> {
    let mode = settings.text(Key::Sampler);
    let wanted = mode == "kernel" || (mode == "auto" && unprofilable == Some(exec_reason::STATIC));
    if !wanted || !settings.bool(Key::UseSampling) {
        return None;
    }
    let hz = settings.float(Key::SamplingCputimeFreq).round().max(1.0) as u64;
    let stack = settings.int(Key::SamplingStackBytes) as u32 & !7;
    // Off-CPU samples cost one stack copy per context switch: only when
    // the kernel samples everything, not for `auto`'s static programs.
    let off_cpu = mode == "kernel" && settings.bool(Key::SamplingOffCpu);
    match strobe_collect::KernelEvents::for_children(hz, stack, 128, off_cpu) {
        Ok(events) => {
            note_system_calls(notes);
            notes.extend(events.off_cpu_refused.clone());
            Some(events)
        }
        Err(e) => {
            let instead = if mode == "kernel" && unprofilable.is_none() {
                "; the signal sampler is used instead"
            } else {
                ""
            };
            notes.push(format!("kernel sampling is off: {e}{instead}"));
            None
        }
    }
}

/// The counters read per thread (`sampling_events`, and what
/// `sampling_metrics` needs) and the metric definitions to store, from the
/// resolved settings and `STROBE_METRICS`.
#[derive(Debug, Default)]
pub struct CounterSetup {
    /// What records carry values of, in order.
    pub counters: Vec<strobe_collect::ProfileCounter>,
    /// The metric definitions each database keeps.
    pub metrics: Vec<strobe_collect::MetricDef>,
}

/// Resolves `sampling_events` and `sampling_metrics`. An unknown counter or
/// metric, a bad definition file, or a counter that describes the whole
/// process (`proc/...`) is an error naming it.
pub fn counter_setup(settings: &Settings) -> Result<CounterSetup> {
    use strobe_metrics::catalog::{self, CounterKind};
    use strobe_metrics::defs::{Definition, MetricSet};
    let mut names: Vec<String> = catalog::split_list(settings.text(Key::SamplingEvents))
        .into_iter()
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
        .collect();
    let requested: Vec<String> = settings
        .text(Key::SamplingMetrics)
        .split(',')
        .map(|m| m.trim().to_string())
        .filter(|m| !m.is_empty())
        .collect();
    let mut setup = CounterSetup::default();
    if !requested.is_empty() {
        let set = MetricSet::from_env().context("reading the metric definitions")?;
        if let Some(unknown) = requested
            .iter()
            .find(|m| set.get(m).is_none() && catalog::resolve(m).is_err())
        {
            anyhow::bail!(
                "unknown metric `{unknown}`; `strobe avail --metrics` lists them (a file of your \
                 own goes in STROBE_METRICS)"
            );
        }
        let wanted: Vec<&str> = requested.iter().map(String::as_str).collect();
        let plan = set
            .plan(&wanted)
            .context("planning the metrics of --sampling-metrics")?;
        names.extend(plan.counters().iter().cloned());
        // The definitions the requested names use, so that later reads
        // need no file: each requested one, and what it refers to.
        let mut todo: Vec<(String, bool)> = requested.iter().map(|r| (r.clone(), true)).collect();
        let mut seen = std::collections::HashSet::new();
        while let Some((name, asked)) = todo.pop() {
            if !seen.insert(name.clone()) {
                continue;
            }
            let def = match set.get(&name) {
                Some(Definition::Metric(m)) => {
                    for n in m.expr.names() {
                        todo.push((n.to_string(), false));
                    }
                    strobe_collect::MetricDef {
                        name: m.name.clone(),
                        kind: "metric".into(),
                        expression: m.expr_text.clone(),
                        unit: m.unit.clone(),
                        description: m.description.clone(),
                        requested: asked,
                    }
                }
                Some(Definition::Counter(c)) => strobe_collect::MetricDef {
                    name: c.name.clone(),
                    kind: "counter".into(),
                    expression: c.spec(),
                    unit: c.unit.clone(),
                    description: c.description.clone(),
                    requested: asked,
                },
                // A catalog event requested by name: counted, no definition.
                None => continue,
            };
            setup.metrics.push(def);
        }
        setup.metrics.reverse();
    }
    if names.is_empty() {
        return Ok(setup);
    }
    let catalog = catalog::catalog();
    for name in names {
        let spec = catalog::resolve(&name).with_context(|| format!("counter `{name}`"))?;
        if spec.kind == CounterKind::Proc {
            anyhow::bail!(
                "counter `{name}` describes the whole process, not a thread: use \
                 --process-sampling-freq for /proc values"
            );
        }
        if setup.counters.iter().any(|c| c.name == spec.name) {
            continue;
        }
        let description = catalog.iter().find(|c| c.name == spec.name).map_or_else(
            || format!("{} counter", spec.kind),
            |c| c.description.clone(),
        );
        setup.counters.push(strobe_collect::ProfileCounter {
            name: spec.name.clone(),
            unit: spec.unit.clone(),
            description,
            component: spec.kind.as_str().to_string(),
            scale: spec.scale,
        });
    }
    if setup.counters.len() > strobe_collect::MAX_COUNTERS {
        anyhow::bail!(
            "{} counters asked for; at most {} can be read per thread",
            setup.counters.len(),
            strobe_collect::MAX_COUNTERS
        );
    }
    Ok(setup)
}

fn launch(args: &SampleArgs, config: Option<&Path>) -> Result<Session> {
    let mut flags = args.flags.clone();
    if !args.events.is_empty() {
        flags.given.push(("sampling_events", args.events.join(",")));
    }
    if !args.metrics.is_empty() {
        flags
            .given
            .push(("sampling_metrics", args.metrics.join(",")));
    }
    let settings = load_settings(config, &flags)?;
    // Refuse an unknown counter or metric before anything runs.
    let counters = counter_setup(&settings)?;
    // Refuse an unknown export format before anything runs.
    for format in &args.formats {
        format.parse::<strobe_export::Format>()?;
    }
    if let Some(pid) = args.pid {
        return attach(args, &settings, pid);
    }
    let output_dir = output_dir(&settings)?;
    let run_dir =
        crate::sample::lazy_run_dir(output_dir, args.command[0].to_string_lossy().into_owned());
    let ran = run_program(&args.command, &settings, &counters, run_dir.clone(), None)?;
    Ok(Session {
        exit_code: ran.exit_code,
        databases: ran.databases,
        output_dir: run_dir.created().unwrap_or_default(),
        python_perf: ran.python_perf,
    })
}

/// What one run of a program under the runtime produced.
pub struct Ran {
    /// The program's exit code for strobe to return.
    pub exit_code: i32,
    /// The databases its processes wrote, in path order.
    pub databases: Vec<PathBuf>,
    /// strobe set `PYTHONPERFSUPPORT` for the program.
    pub python_perf: bool,
}

/// Runs `command` under the runtime with a collector writing into
/// `run_dir`, and waits for it and everything it started; prints the
/// collector's notes. `causal`: the experiments `strobe causal` runs.
pub fn run_program(
    command: &[OsString],
    settings: &Settings,
    counters: &CounterSetup,
    run_dir: Arc<strobe_collect::RunDir>,
    causal: Option<strobe_collect::causal::CausalOptions>,
) -> Result<Ran> {
    let runtime = runtime_lib::locate(settings.path(Key::Runtime))?;
    // Before anything starts: a missing dispatcher is an error. Nothing to
    // do when tracing is not recorded.
    let xpti = if settings.bool(Key::Xpti) && settings.bool(Key::UseTracing) {
        crate::xpti_env::for_program(&runtime)?
    } else {
        Vec::new()
    };
    let causal_run = causal.is_some();
    let collector = strobe_collect::Collector::start(strobe_collect::Options {
        causal,
        ..collector_options(settings, run_dir, false, counters)
    })?;
    // Opened after the collector's threads started (they must not inherit
    // the events) and before the program: `sampler = kernel` falls back to
    // the signal sampler when the kernel refuses (said in the notes).
    let mut notes = Vec::new();
    let reason = unprofilable(&command[0]);
    let kernel = kernel_events(settings, reason, &mut notes);
    let kernel_samples_all = kernel.is_some() && settings.text(Key::Sampler) == "kernel";

    let mut env: Vec<(OsString, OsString)> = settings
        .to_env()
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
    let config = RuntimeConfig {
        causal: causal_run,
        ..runtime_config(settings, kernel_samples_all, counters)
    };
    env.push((CONFIG_ENV.into(), config.encode().into()));
    env.push((COLLECTOR_ENV.into(), collector.address().into()));
    let mut preload = OsString::from(&runtime);
    if let Some(existing) = std::env::var_os("LD_PRELOAD").filter(|p| !p.is_empty()) {
        preload.push(":");
        preload.push(existing);
    }
    env.push(("LD_PRELOAD".into(), preload));
    // For the program itself: its XPTI runtimes read them.
    env.extend(xpti);
    // CPython >= 3.12 then writes a perf map naming its functions.
    let python_perf = settings.bool(Key::SamplingPythonPerf)
        && std::env::var_os(PYTHON_PERF_ENV).is_none_or(|v| v.is_empty());
    if python_perf {
        env.push((PYTHON_PERF_ENV.into(), "1".into()));
    }

    if let Some(reason) = reason {
        let what = if kernel.is_some() {
            "sampled by the kernel only (no regions, markers or tracing)"
        } else {
            "not profiled"
        };
        notes.push(format!(
            "{} {}: {what}",
            command[0].to_string_lossy(),
            exec_reason::describe(reason)
        ));
    }
    if let Some(events) = kernel {
        collector.sample_kernel(events, kernel_samples_all);
    }
    let outcome = run(command, &env, &["STROBE_CONFIG"], |pid| {
        collector.announce(pid)
    })?;
    collector.program_done();
    let report = wait_for_collector(collector);
    notes.extend(report.notes);
    for note in &notes {
        say!("strobe: {note}");
    }
    let exit_code = match outcome {
        Outcome::NotStarted(code, message) => {
            say!("strobe: error: {message}");
            code
        }
        Outcome::Finished(status) => {
            if let Some(signal) = status.signal() {
                eprintln!("strobe: the program was killed by {}", signal_name(signal));
            }
            exit_code(&status)
        }
    };
    let mut databases = report.databases;
    databases.sort();
    Ok(Ran {
        exit_code,
        databases,
        python_perf,
    })
}

/// The `output_dir` setting resolved against the current directory, and
/// created (an unusable one stops strobe before anything runs).
pub fn output_dir(settings: &Settings) -> Result<PathBuf> {
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let dir = cwd.join(settings.path(Key::OutputDir).unwrap_or(Path::new(".")));
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create the output directory {}", dir.display()))?;
    Ok(dir)
}

/// The run directory of `command` under `output_dir`, created (and
/// `latest` pointed at it) when the collector writes the first database:
/// a run that records nothing leaves nothing behind. The ranks of an MPI
/// job share one ([`crate::run_dir::join_job`]).
pub fn lazy_run_dir(output_dir: PathBuf, command: String) -> Arc<strobe_collect::RunDir> {
    let job = strobe_core::mpi_job::MpiJob::current();
    Arc::new(strobe_collect::RunDir::new(move || {
        match &job {
            Some(j) => crate::run_dir::join_job(&output_dir, &command, &j.job, j.rank == 0),
            None => crate::run_dir::create(&output_dir, &command),
        }
        .map_err(|e| std::io::Error::other(format!("{e:#}")))
    }))
}

/// Why the command cannot be profiled at all, when that shows before it
/// runs (a static or setuid binary).
fn unprofilable(command: &OsString) -> Option<u32> {
    use std::os::unix::ffi::OsStrExt;
    let resolved = strobe_core::image::resolve_command(command.as_bytes());
    let reason = strobe_core::image::exec_reason_for(&resolved);
    (reason != exec_reason::NONE).then_some(reason)
}

/// The program is done: waits for the collector, prints its notes and
/// returns the databases it wrote, in path order.
pub fn finish_collecting(collector: strobe_collect::Collector) -> Vec<PathBuf> {
    collector.program_done();
    let report = wait_for_collector(collector);
    for note in &report.notes {
        say!("strobe: {note}");
    }
    let mut databases = report.databases;
    databases.sort();
    databases
}

/// Waits for the collector: processes the program started may outlive it
/// (daemons); they are followed until they end or the user interrupts.
pub fn wait_for_collector(collector: strobe_collect::Collector) -> strobe_collect::Report {
    let mut told = false;
    let started = std::time::Instant::now();
    while !collector.wait_finished(Duration::from_millis(20)) {
        if crate::launch::interrupted() {
            collector.interrupt();
            break;
        }
        if !told && started.elapsed() > Duration::from_millis(500) {
            let live = collector.live();
            if !live.is_empty() {
                told = true;
                let names: Vec<String> =
                    live.iter().map(|(pid, c)| format!("{pid} ({c})")).collect();
                eprintln!(
                    "strobe: the program exited; {} process(es) it started are still running: {}; collecting until they end (Ctrl-C to stop)",
                    live.len(),
                    names.join(", ")
                );
            }
        }
    }
    collector.wait()
}
