//! `strobe`: the command line, as a library: the `strobe` binary
//! (`main.rs`) and the Python package's `python -m strobe` call
//! [`run_cli`]. A thin layer over the libraries: each subcommand lives in
//! its own module and only parses, calls and prints.

/// `eprintln!` for text that may hold what a profiled program chose
/// (names, paths, messages): its control characters are escaped
/// (`strobe_core::escape::for_terminal`), so nothing reaches the terminal
/// raw.
macro_rules! say {
    ($($arg:tt)*) => {
        eprintln!("{}", strobe_core::escape::for_terminal(&format!($($arg)*)))
    };
}

mod avail;
mod avail_counters;
mod causal;
mod causal_report;
mod collect_for;
mod components;
mod convert;
mod held;
mod launch;
mod merge;
mod output;
mod progress;
mod query;
mod run_dir;
mod runtime_lib;
mod sample;
mod setting_flags;
mod stat;
mod stat_report;
mod summary;
mod summary_args;
mod summary_mpi;
mod symbolize;
mod symbolize_cmd;
mod xpti_env;

use clap::{Parser, Subcommand};
use std::ffi::OsString;
use std::path::PathBuf;

const EXAMPLES: &str = "\
Examples:
  strobe sample -- ./app args                    profile a program (see `strobe sample --help`)
  strobe sample --flamegraph -- ./app            ... and write an SVG flamegraph
  strobe causal -- ./app args                    which code, if made faster, makes the program faster
  strobe causal report -i strobe-output/latest   the causal report again (SVG curves, profile.coz)
  strobe stat -- ./app args                      count events and metrics, as perf stat does
  strobe summary -i strobe-output                the tables again, for every process
  strobe convert -i strobe-output -f pftrace     a Perfetto trace of the run
  strobe avail                                   every setting, its value and where it came from
  strobe avail --components                      what strobe can measure
  strobe avail --counters                        what can be counted here (strobe stat -e)
  strobe avail --metrics                         the derived metrics (strobe stat -M)
  strobe avail --settings --category sampling    only the sampling settings
  strobe avail --json                            the same as JSON
  strobe avail --generate-config strobe.toml     write a commented config file
  strobe --config strobe.toml avail              use a config file
  STROBE_SAMPLING_FREQ=500 strobe avail          settings also come from STROBE_* variables";

#[derive(Parser)]
#[command(
    name = "strobe",
    version,
    about = "Performance analysis for Linux programs: sampling, tracing and profile databases",
    after_help = EXAMPLES
)]
struct Cli {
    /// Read settings from this TOML file (overrides STROBE_CONFIG; flags and STROBE_* variables
    /// still win over it).
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show settings (with their effective values and sources) and write config files.
    Avail(avail::AvailArgs),
    /// Run a program under the sampling profiler: `strobe sample [options] -- <command> <args>`.
    Sample(sample::SampleArgs),
    /// Causal profiling: which code, if made faster, would make the program faster:
    /// `strobe causal [options] -- <command> <args>`; `strobe causal report` reads the results.
    Causal(causal::CausalArgs),
    /// Count events and derived metrics of a program, as `perf stat` does:
    /// `strobe stat [-e EVENTS] [-M METRICS] -- <command> <args>`.
    Stat(stat::StatArgs),
    /// Run SQL on one or many profile databases (as one database).
    Query(query::QueryArgs),
    /// Merge profile databases into one file.
    Merge(merge::MergeArgs),
    /// Summary tables: regions, sampled functions, threads.
    Summary(summary_args::SummaryArgs),
    /// Convert databases to Perfetto, Chrome JSON, flamegraphs, pprof, Firefox Profiler, CSV.
    Convert(convert::ConvertArgs),
    /// Name the unnamed frames of profile databases (after `--no-symbols`, new debug files, a
    /// copied database).
    Symbolize(symbolize_cmd::SymbolizeArgs),
    /// Internal: the collector a runtime preloaded without `strobe sample` starts for itself.
    #[command(hide = true)]
    CollectFor(collect_for::CollectForArgs),
}

/// The subcommands that only read and write files (no program is run):
/// what an embedding such as `python -m strobe` offers.
pub const POST_PROCESSING: &[&str] = &[
    "avail",
    "query",
    "merge",
    "summary",
    "convert",
    "symbolize",
    "causal report",
];

/// How [`run_cli`] is called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Host {
    /// The `strobe` binary: every subcommand, and the process is ours
    /// (signal dispositions may be set).
    Binary,
    /// A host process (the Python interpreter): only [`POST_PROCESSING`]
    /// subcommands, and the process's signal dispositions are left alone.
    Embedded,
}

/// Parses `args` (the program name first) and runs the subcommand;
/// returns the exit status. Usage errors, `--help` and `--version` print
/// as clap prints them and return its status instead of exiting.
pub fn run_cli<I, T>(args: I, host: Host) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return e.exit_code().clamp(0, 255) as u8;
        }
    };
    let name = command_name(&cli.command);
    if host == Host::Embedded && runs_a_program(&cli.command) {
        eprintln!(
            "strobe: error: `{name}` runs a program: use the `strobe` binary for it \
             (here: {})",
            POST_PROCESSING.join(", ")
        );
        return 2;
    }
    let config = cli.config.as_deref();
    if host == Host::Binary && !runs_a_program(&cli.command) {
        // Listings piped into `head` end quietly, as other tools do; the
        // commands that run a program keep ignoring SIGPIPE so that a
        // closed terminal never loses what they collect.
        // SAFETY: restoring the default disposition before any thread.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    let result = match cli.command {
        Command::Avail(args) => avail::run(&args, config).map(|()| 0),
        Command::Sample(args) => sample::run_sample(&args, config),
        Command::Causal(args) => causal::run(&args, config),
        Command::Stat(args) => stat::run(&args),
        Command::Query(args) => query::run(args).map(|()| 0),
        Command::Merge(args) => merge::run(args).map(|()| 0),
        Command::Summary(args) => summary::run(args).map(|()| 0),
        Command::Convert(args) => convert::run(args).map(|()| 0),
        Command::Symbolize(args) => symbolize_cmd::run(args).map(|()| 0),
        Command::CollectFor(args) => collect_for::run(&args, config),
    };
    match result {
        Ok(code) => code.clamp(0, 255) as u8,
        Err(e) => {
            for line in format!("{e:#}").lines() {
                say!("strobe: error: {line}");
            }
            // 2 for invalid settings (like clap's usage errors), 1 otherwise.
            if e.is::<setting_flags::InvalidSettings>() {
                2
            } else {
                1
            }
        }
    }
}

/// Whether the subcommand runs a program (and so keeps ignoring
/// `SIGPIPE`).
fn runs_a_program(c: &Command) -> bool {
    match c {
        Command::Sample(_) | Command::Stat(_) | Command::CollectFor(_) => true,
        Command::Causal(args) => args.report.is_none(),
        _ => false,
    }
}

fn command_name(c: &Command) -> &'static str {
    match c {
        Command::Avail(_) => "avail",
        Command::Sample(_) => "sample",
        Command::Causal(_) => "causal",
        Command::Stat(_) => "stat",
        Command::Query(_) => "query",
        Command::Merge(_) => "merge",
        Command::Summary(_) => "summary",
        Command::Convert(_) => "convert",
        Command::Symbolize(_) => "symbolize",
        Command::CollectFor(_) => "collect-for",
    }
}
