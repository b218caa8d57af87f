//! `strobe-bench`: benchmark harnesses. Each subcommand lives in its own
//! module, prints its figures and never asserts a timing.

use clap::{Parser, Subcommand};

mod tracing;

#[derive(Parser)]
#[command(name = "strobe-bench", version, about = "strobe's benchmark harnesses")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The seed 004 tracing-framework harness (strobe-trace).
    Tracing(tracing::TracingArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Tracing(args) => tracing::run(args),
    }
}
