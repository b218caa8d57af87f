//! The table of every strobe setting. Adding a setting is one entry in the
//! `settings!` invocation below: its name, category, type, default and
//! description; the environment variable, the CLI flag, `strobe avail`, the
//! generated config file and the typed [`Key`] all follow from it.
//!
//! Owns the definitions only; resolution lives in `resolve.rs`.

use super::value::Kind;

/// Where settings are grouped in `strobe avail` and the config file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Category {
    /// Logging, plugins, the runtime library.
    General,
    /// Where and how results are written.
    Output,
    /// The call-stack sampler.
    Sampling,
    /// Traced regions and time windows.
    Tracing,
    /// The buffered record service between producers and consumers.
    Buffer,
    /// Causal profiling (`strobe causal`).
    Causal,
}

impl Category {
    /// Every category in display order.
    pub const ALL: [Category; 6] = [
        Category::General,
        Category::Output,
        Category::Sampling,
        Category::Tracing,
        Category::Buffer,
        Category::Causal,
    ];

    /// The lower-case name used by `--category`.
    pub const fn name(self) -> &'static str {
        match self {
            Category::General => "general",
            Category::Output => "output",
            Category::Sampling => "sampling",
            Category::Tracing => "tracing",
            Category::Buffer => "buffer",
            Category::Causal => "causal",
        }
    }

    /// Looks a category up by name (case-insensitive).
    pub fn from_name(name: &str) -> Option<Category> {
        Category::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(name))
    }
}

/// A setting's default.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DefaultValue {
    /// This text, parsed by the setting's kind.
    Text(&'static str),
    /// No value of its own: the value of another setting (timer overrides).
    Inherit(Key),
    /// No value unless one is given.
    Unset,
}

/// The definition of one setting.
#[derive(Debug, Clone, Copy)]
pub struct SettingDef {
    /// Typed handle.
    pub key: Key,
    /// Canonical name, lower snake case (`sampling_freq`); the config-file key.
    pub name: &'static str,
    /// Group.
    pub category: Category,
    /// Type and constraints.
    pub kind: Kind,
    /// Default.
    pub default: DefaultValue,
    /// One or two sentences for `strobe avail` and `--help`.
    pub description: &'static str,
}

impl SettingDef {
    /// `STROBE_` followed by the upper-cased name.
    pub fn env_var(&self) -> String {
        format!("STROBE_{}", self.name.to_ascii_uppercase())
    }

    /// The long flag without dashes (`sampling-freq`).
    pub fn flag(&self) -> String {
        self.name.replace('_', "-")
    }

    /// The definition of `key`.
    pub fn of(key: Key) -> &'static SettingDef {
        &SETTINGS[key as usize]
    }

    /// Looks a definition up by canonical name.
    pub fn by_name(name: &str) -> Option<&'static SettingDef> {
        SETTINGS.iter().find(|d| d.name == name)
    }

    /// Looks a definition up by environment variable.
    pub fn by_env_var(var: &str) -> Option<&'static SettingDef> {
        let name = var.strip_prefix("STROBE_")?;
        SETTINGS
            .iter()
            .find(|d| d.name.eq_ignore_ascii_case(name) && !name.contains(char::is_lowercase))
    }
}

/// Drops the space rustdoc leaves at the start of a `///` comment.
const fn trim_doc(doc: &'static str) -> &'static str {
    match doc.as_bytes() {
        [b' ', rest @ ..] => match std::str::from_utf8(rest) {
            Ok(text) => text,
            Err(_) => doc,
        },
        _ => doc,
    }
}

macro_rules! settings {
    ($( $(#[doc = $doc:literal])+ $key:ident = $name:literal, $category:ident, $kind:expr, $default:expr; )+) => {
        /// Typed handle of every setting, in registry order.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Key { $( $(#[doc = $doc])+ $key ),+ }

        /// Every setting, indexed by `Key as usize`.
        pub static SETTINGS: &[SettingDef] = &[ $( SettingDef {
            key: Key::$key,
            name: $name,
            category: Category::$category,
            kind: $kind,
            default: $default,
            description: trim_doc(concat!($($doc),+)),
        } ),+ ];
    };
}

use DefaultValue::{Inherit, Text, Unset};

const FREQ: Kind = Kind::Float {
    min: 0.001,
    max: 100_000.0,
};
const SIGNAL: Kind = Kind::Int { min: 0, max: 64 };

settings! {
    /// How much strobe reports about itself: 0 = warnings and errors, 1 = progress, 2 = details, 3 = debugging.
    Verbose = "verbose", General, Kind::Int { min: 0, max: 3 }, Text("0");
    /// The runtime library to preload instead of the one strobe finds itself.
    Runtime = "runtime", General, Kind::Path, Unset;
    /// Tool plugin libraries to load into the profiled process, separated by ':'.
    ToolLib = "tool_lib", General, Kind::List { sep: ':' }, Text("");
    /// What a forked child does: 'follow' profiles it into its own database, 'stop' turns profiling off in the child.
    ForkMode = "fork_mode", General, Kind::Enum(&["follow", "stop"]), Text("follow");
    /// Directory that receives the profile databases and exports.
    OutputDir = "output_dir", Output, Kind::Path, Text("strobe-output");
    /// Database path inside output_dir; placeholders %hostname%, %pid%, %ppid%, %rank%, %env{NAME}%.
    OutputFile = "output_file", Output, Kind::PathTemplate, Text("%hostname%/%pid%.db");
    /// How often buffered data is written to the database; a killed process loses at most this much.
    FlushInterval = "flush_interval", Output, Kind::Duration, Text("1s");
    /// Take call-stack samples.
    UseSampling = "use_sampling", Sampling, Kind::Bool, Text("true");
    /// Sampling backend: 'signal' = timers and a signal handler in the program; 'kernel' = perf events sampled by the kernel (CPU time, every thread and child), unwound by the collector; 'auto' = signal, and kernel for programs nothing can be preloaded into (static, setuid).
    Sampler = "sampler", Sampling, Kind::Enum(&["auto", "signal", "kernel"]), Text("auto");
    /// With the kernel sampler ('sampler = kernel', '--pid'): also record off-CPU time, where threads block and for how long (a sample at each context switch; needs kernel.perf_event_paranoid <= 1 or CAP_PERFMON).
    SamplingOffCpu = "sampling_off_cpu", Sampling, Kind::Bool, Text("true");
    /// Bytes of user stack the kernel copies with each sample (kernel backend); deeper stacks are cut.
    SamplingStackBytes = "sampling_stack_bytes", Sampling, Kind::Int { min: 1024, max: 65528 }, Text("16384");
    /// Samples per second per thread for every timer unless a timer overrides it. CPU-time timers are capped by the kernel tick (often 250 Hz).
    SamplingFreq = "sampling_freq", Sampling, FREQ, Text("250");
    /// Time after start-up before the timers start.
    SamplingDelay = "sampling_delay", Sampling, Kind::Duration, Text("0");
    /// How long the timers run after the delay; 0 = until the program ends.
    SamplingDuration = "sampling_duration", Sampling, Kind::Duration, Text("0");
    /// Sample each thread on its CPU time (finds where CPU time goes).
    SamplingCputime = "sampling_cputime", Sampling, Kind::Bool, Text("true");
    /// Sample each thread on elapsed real time (also finds where threads wait).
    SamplingRealtime = "sampling_realtime", Sampling, Kind::Bool, Text("false");
    /// CPU-time timer frequency; overrides sampling_freq.
    SamplingCputimeFreq = "sampling_cputime_freq", Sampling, FREQ, Inherit(Key::SamplingFreq);
    /// CPU-time timer delay; overrides sampling_delay.
    SamplingCputimeDelay = "sampling_cputime_delay", Sampling, Kind::Duration, Inherit(Key::SamplingDelay);
    /// CPU-time timer duration; overrides sampling_duration.
    SamplingCputimeDuration = "sampling_cputime_duration", Sampling, Kind::Duration, Inherit(Key::SamplingDuration);
    /// Real-time timer frequency; overrides sampling_freq.
    SamplingRealtimeFreq = "sampling_realtime_freq", Sampling, FREQ, Inherit(Key::SamplingFreq);
    /// Real-time timer delay; overrides sampling_delay.
    SamplingRealtimeDelay = "sampling_realtime_delay", Sampling, Kind::Duration, Inherit(Key::SamplingDelay);
    /// Real-time timer duration; overrides sampling_duration.
    SamplingRealtimeDuration = "sampling_realtime_duration", Sampling, Kind::Duration, Inherit(Key::SamplingDuration);
    /// Signal number the CPU-time timer delivers; 0 = a free real-time signal chosen in each process.
    SamplingCputimeSignal = "sampling_cputime_signal", Sampling, SIGNAL, Text("0");
    /// Signal number the real-time timer delivers; 0 = a free real-time signal chosen in each process.
    SamplingRealtimeSignal = "sampling_realtime_signal", Sampling, SIGNAL, Text("0");
    /// Most frames recorded per call stack.
    SamplingDepth = "sampling_depth", Sampling, Kind::Int { min: 1, max: 8000 }, Text("512");
    /// Size of each thread's sample ring in the shared segment, in samples of 64 bytes (rounded up to a power of two); the collector drains it every 5 ms.
    SamplingBufferSamples = "sampling_buffer_samples", Sampling, Kind::Int { min: 1024, max: 1_048_576 }, Text("1024");
    /// Counters read on every thread of the program around each region and with each sample (comma-separated, as 'strobe stat -e' takes them: task-clock, page-faults, cycles, ...; 'strobe sample -e'); stored per region and per sample. Empty = none: the program then gets no descriptor for them.
    SamplingEvents = "sampling_events", Sampling, Kind::Str, Text("");
    /// Derived metrics computed per region and per function from the counters (comma-separated; built in, or defined in the STROBE_METRICS file; 'strobe sample -M'); the counters they need are read too.
    SamplingMetrics = "sampling_metrics", Sampling, Kind::Str, Text("");
    /// Set PYTHONPERFSUPPORT=1 for the program (unless it is set already), so that CPython 3.12 and newer writes /tmp/perf-<pid>.map and its functions are named in the stacks; the maps strobe caused are deleted once their names are in the database.
    SamplingPythonPerf = "sampling_python_perf", Sampling, Kind::Bool, Text("true");
    /// How often per second the collector reads each process's RSS, threads, CPU utilisation, context switches, I/O bytes and CPU frequency from /proc (outside the program), stored as counter series; 0 = never.
    ProcessSamplingFreq = "process_sampling_freq", Sampling, Kind::Float { min: 0.0, max: 1000.0 }, Text("0");
    /// When every collector may collect: [clock:]delay[:duration[:cycles]] specs run one after another; empty = always.
    TracePeriods = "trace_periods", Tracing, Kind::TimeWindows, Text("");
    /// Keep in the database only user-API regions at least this long; every region still counts, per thread and name, in strobe_region_stats (calls, total and self time) and in strobe summary. 0 = keep every region.
    TraceTimeFilter = "trace_time_filter", Tracing, Kind::Duration, Text("0");
    /// Record regions and markers from the user API and XPTI events.
    UseTracing = "use_tracing", Tracing, Kind::Bool, Text("true");
    /// Record the notifications of XPTI-instrumented runtimes (SYCL, Unified Runtime): the program gets XPTI_TRACE_ENABLE=1, XPTI_FRAMEWORK_DISPATCHER (libstrobe_xpti.so next to the runtime, unless already set) and strobe's runtime appended to XPTI_SUBSCRIBERS; the program sees these variables.
    Xpti = "xpti", Tracing, Kind::Bool, Text("false");
    /// Bytes per buffer between producers and the database writer (rounded up to the page size).
    BufferSize = "buffer_size", Buffer, Kind::Int { min: 4096, max: 1 << 30 }, Text("4194304");
    /// What a full buffer does: 'lossless' makes producers wait for an empty buffer, 'discard' drops and counts records.
    BufferPolicy = "buffer_policy", Buffer, Kind::Enum(&["lossless", "discard"]), Text("lossless");
    /// What a causal experiment selects: one source 'line' (from the DWARF line table) or a whole 'function'.
    CausalMode = "causal_mode", Causal, Kind::Enum(&["line", "function"]), Text("line");
    /// Regular expression over module paths whose code experiments may select; empty = the program's main executable only.
    CausalBinaryScope = "causal_binary_scope", Causal, Kind::Str, Text("");
    /// Regular expression over source file paths whose lines experiments may select; empty = every file.
    CausalSourceScope = "causal_source_scope", Causal, Kind::Str, Text("");
    /// Regular expression over (demangled) function names whose code experiments may select; empty = every function.
    CausalFunctionScope = "causal_function_scope", Causal, Kind::Str, Text("");
    /// Experiments select only this line ('file:line', the file as a path suffix such as main.c:42) or function (its demangled name), as Coz's --fixed-line; empty = any code in scope.
    CausalFixed = "causal_fixed", Causal, Kind::Str, Text("");
    /// Virtual speedups in percent experiments draw from: a comma-separated list of values and ranges 'first-last:step'; about a quarter of the experiments are 0% controls when 0 is listed.
    CausalSpeedups = "causal_speedups", Causal, Kind::Str, Text("0-100:5");
    /// One experiment per run, spanning the whole run (for programs without progress points): each run of the program is one speedup; use with causal_iterations.
    CausalEndToEnd = "causal_end_to_end", Causal, Kind::Bool, Text("false");
    /// How many times `strobe causal` runs the program (end-to-end: runs per listed speedup); each run is a variant, forked and exec'd with its own environment.
    CausalIterations = "causal_iterations", Causal, Kind::Int { min: 1, max: 100000 }, Text("1");
    /// Seeds the experiments' choices of code and speedup; 0 = a different seed every run.
    CausalSeed = "causal_seed", Causal, Kind::Int { min: 0, max: i64::MAX }, Text("0");
}
