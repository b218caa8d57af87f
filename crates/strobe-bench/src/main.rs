//! `strobe-bench`: benchmark harnesses. Each subcommand lives in its own
//! module, prints its figures and never asserts a timing.

use clap::{Parser, Subcommand};

mod db;

#[derive(Parser)]
#[command(name = "strobe-bench", version, about = "strobe's benchmark harnesses")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Profile database: writer vs raw inserts, peak RSS, merge rate.
    Db(db::DbArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Db(a) => db::run(a),
    }
}
