//! The measurement components strobe has, for `strobe avail --components`:
//! what each records, where it goes, and the settings that turn it on.
//!
//! Owns the descriptions only; the components themselves live in the
//! runtime, the sampler and the tracing framework.

/// One measurement component or capability.
pub struct Component {
    /// Short name.
    pub name: &'static str,
    /// What it records or does.
    pub records: &'static str,
    /// Where the data ends up.
    pub stored_in: &'static str,
    /// The settings that enable and shape it.
    pub settings: &'static str,
}

/// Every component, in the order `strobe avail --components` lists them.
pub const COMPONENTS: &[Component] = &[
    Component {
        name: "sampling.cputime",
        records: "call stack of each thread every 1/sampling_cputime_freq s of its CPU time (at most 250/s here: kernel tick), with timestamp, thread CPU time and peak RSS",
        stored_in: "rocpd_sample, strobe_callsite, strobe_frame, strobe_module",
        settings: "use_sampling, sampling_cputime, sampling_cputime_freq/delay/duration, sampling_depth, trace_periods",
    },
    Component {
        name: "sampling.realtime",
        records: "call stack of each thread every 1/sampling_realtime_freq s of elapsed time, also while it waits",
        stored_in: "rocpd_sample (track 'samples')",
        settings: "sampling_realtime, sampling_realtime_freq/delay/duration, sampling_realtime_signal",
    },
    Component {
        name: "regions",
        records: "named regions (push/pop) and markers from include/strobe.h and the strobe-api crate, per thread, with nesting depth",
        stored_in: "rocpd_region, rocpd_event, rocpd_arg (category user / marker)",
        settings: "use_tracing",
    },
    Component {
        name: "xpti",
        records: "begin/end pairs and instants notified by XPTI-instrumented runtimes (SYCL, Unified Runtime, C/C++ code using the XPTI API), through the program's XPTI dispatcher, with the runtime as its subscriber",
        stored_in: "rocpd_region (category task, barrier, lock, wait, function, ...; argument 'stream')",
        settings: "xpti (strobe sample --xpti), use_tracing",
    },
    Component {
        name: "threads",
        records: "every program thread: start, end, name (pthread_create wrapper; threads older than strobe are adopted)",
        stored_in: "rocpd_info_thread",
        settings: "always on",
    },
    Component {
        name: "modules",
        records: "executable and shared libraries with build id, load bias and size, as loaded and unloaded (dlopen/dlclose)",
        stored_in: "strobe_module",
        settings: "always on",
    },
    Component {
        name: "process",
        records: "fork (child profiled into its own database or not), exec (profile finished, new image profiled), exit paths, fatal signals (emergency flush, then the program dies as it would have)",
        stored_in: "one database per process image",
        settings: "fork_mode, output_dir, output_file, flush_interval",
    },
    Component {
        name: "tools",
        records: "C tool plugins receive every record kind through their own buffers (include/strobe_tool.h)",
        stored_in: "wherever the tool writes",
        settings: "tool_lib (STROBE_TOOL_LIB)",
    },
];
