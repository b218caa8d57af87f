//! `strobe-bench`: benchmark harnesses. Each subcommand lives in its own
//! module, prints its figures and never asserts a timing.

use clap::{Parser, Subcommand};

mod buffer;

#[derive(Parser)]
#[command(name = "strobe-bench", version, about = "strobe's benchmark harnesses")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Throughput of the buffered record service (strobe-buffer).
    Buffer(buffer::BufferArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Buffer(args) => buffer::run(args),
    }
}
