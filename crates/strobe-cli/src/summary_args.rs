//! The arguments of `strobe summary`: which tables, in which format, for
//! which inputs and window.
//!
//! Owns [`SummaryArgs`], [`Report`] and [`SummaryFormat`], shared by the
//! summary's printers (`summary`, `summary_mpi`) and by `strobe sample`,
//! which prints the same tables at the end of a run. It never reads a
//! profile and never prints.

use clap::{Args, ValueEnum};

/// Which tables to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Report {
    /// All of them.
    All,
    /// Regions by name.
    Regions,
    /// Sampled functions (self and inclusive).
    Functions,
    /// Threads.
    Threads,
    /// MPI: time in MPI per rank, per MPI function, the ranks that wait
    /// most (`all` includes it only when the run made MPI calls).
    Mpi,
}

/// Output formats of `strobe summary`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SummaryFormat {
    /// Aligned tables.
    Table,
    /// CSV, one block per table, each preceded by a `# name` line.
    Csv,
    /// One JSON object with one array per table.
    Json,
}

/// Arguments of `strobe summary`.
#[derive(Debug, Clone, Args)]
pub struct SummaryArgs {
    /// Input databases: files, directories (searched for *.db) or globs.
    /// Default: the latest run, `<output_dir>/latest` (`strobe-output/latest`).
    #[arg(short = 'i', long = "input", num_args = 1..)]
    pub inputs: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: SummaryFormat,
    /// Which tables.
    #[arg(long, value_enum, default_value = "all")]
    pub report: Report,
    /// Print at most this many rows per table, and per process with
    /// `--by-process` (after sorting; shares stay relative to all rows).
    /// 0 prints every row.
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
    /// Print names whole (tables elide the middle of names longer than
    /// 80 characters).
    #[arg(long)]
    pub wide: bool,
    /// One set of rows per process (shares within each process).
    #[arg(long)]
    pub by_process: bool,
    /// Summarize the databases of several runs (`strobe sample`
    /// invocations) as one; by default each run gets its own tables.
    #[arg(long)]
    pub merge_runs: bool,
    /// Restrict to a window from here (ns after the run start, or %).
    #[arg(long)]
    pub start: Option<String>,
    /// Restrict to a window up to here (ns after the run start, or %).
    #[arg(long)]
    pub end: Option<String>,
    /// Leave out the notes stored with the run (`strobe sample` printed
    /// them already).
    #[arg(skip)]
    pub without_notes: bool,
}
