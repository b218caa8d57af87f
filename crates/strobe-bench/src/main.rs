//! `strobe-bench`: benchmark harnesses. Each subcommand lives in its own
//! module, prints its figures and never asserts a timing.

mod api;
mod buffer;
mod causal;
mod clocks;
mod db;
mod events;
mod export;
mod kernel;
mod metrics;
mod multinode;
mod multinode_mpi;
mod overhead;
mod procs;
mod sampling;
mod tracing;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "strobe-bench", version, about = "strobe's benchmark harnesses")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Cost of a user-API region, without strobe or under `strobe sample`.
    Api(api::ApiArgs),
    /// Throughput of the buffered record service (strobe-buffer).
    Buffer(buffer::BufferArgs),
    /// Accuracy of `strobe causal` against programs with a known answer, beside Coz.
    Causal(causal::CausalArgs),
    /// Cost and resolution of every timestamp source.
    Clocks(clocks::ClocksArgs),
    /// Profile database: writer vs raw inserts, peak RSS, merge rate.
    Db(db::DbArgs),
    /// The event path end to end: regions through `strobe sample` beside uftrace.
    Events(events::EventsArgs),
    /// Conversion throughput and peak RSS of the exporters (strobe-export).
    Export(export::ExportArgs),
    /// The kernel sampling backend's goals, side by side with `perf record --call-graph dwarf`.
    Kernel(kernel::KernelArgs),
    /// strobe-metrics: `strobe stat` beside `perf stat`, read cost beside PAPI_read, metric rate.
    Metrics(metrics::MetricsArgs),
    /// Many-rank MPI jobs: post-processing over thousands of rank databases (`--part scale`).
    Multinode(multinode::MultinodeArgs),
    /// What profiling costs a CPU-bound program: strobe and perf side by side.
    Overhead(overhead::OverheadArgs),
    /// What strobe adds per process and per thread, plain and under `strobe sample`.
    Procs(procs::ProcsArgs),
    /// Quality of `strobe sample`: accuracy, unwinding, depth, fixed cost, size.
    Sampling(sampling::SamplingArgs),
    /// The seed 004 tracing-framework harness (strobe-trace).
    Tracing(tracing::TracingArgs),
}

fn main() -> anyhow::Result<()> {
    // A closed pipe (`strobe-bench … | head`) ends the harness quietly, as
    // it would any command-line tool, instead of a panic in `println!`.
    // SAFETY: setting a signal's disposition before any thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let cli = Cli::parse();
    match cli.command {
        Command::Api(args) => api::run(&args),
        Command::Buffer(args) => buffer::run(args),
        Command::Causal(args) => causal::run(&args),
        Command::Clocks(args) => clocks::run(&args),
        Command::Kernel(args) => kernel::run(&args),
        Command::Metrics(args) => metrics::run(&args),
        Command::Multinode(args) => multinode::run(args),
        Command::Overhead(args) => overhead::run(&args),
        Command::Procs(args) => procs::run(&args),
        Command::Db(args) => db::run(args),
        Command::Events(args) => events::run_events(&args),
        Command::Export(args) => export::run(args),
        Command::Sampling(args) => sampling::run(&args),
        Command::Tracing(args) => tracing::run(args),
    }
}
