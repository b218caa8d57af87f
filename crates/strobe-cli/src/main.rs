//! `strobe`: the command line. Each subcommand lives in its own module.

use clap::{Parser, Subcommand};

mod merge;
mod output;
mod query;
mod summary;

#[derive(Parser)]
#[command(
    name = "strobe",
    version,
    about = "strobe: performance analysis for Linux programs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run SQL on one or many profile databases (as one database).
    Query(query::QueryArgs),
    /// Merge profile databases into one file.
    Merge(merge::MergeArgs),
    /// Summary tables: regions, sampled functions, threads.
    Summary(summary::SummaryArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Query(a) => query::run(a),
        Command::Merge(a) => merge::run(a),
        Command::Summary(a) => summary::run(a),
    }
}
