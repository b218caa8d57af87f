//! `strobe merge`: physical merge of profile databases.
//!
//! Owns the command's arguments and the progress bar; the merge itself is
//! strobe-db's. It never touches the inputs.

use std::path::PathBuf;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

/// Arguments of `strobe merge`.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// Input databases: files, directories (searched for *.db) or globs.
    #[arg(short = 'i', long = "input", required = true, num_args = 1..)]
    pub inputs: Vec<String>,
    /// Output database (must not exist).
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
    /// Do not show a progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// Runs `strobe merge`.
pub fn run(a: MergeArgs) -> anyhow::Result<()> {
    let files = strobe_db::inputs::expand_inputs(&a.inputs)?;
    let bar = if a.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(0)
    };
    bar.set_style(
        ProgressStyle::with_template("{spinner} merging [{bar:40}] {human_pos}/{human_len} rows ({per_sec}, eta {eta}) {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let stats = strobe_db::merge(&files, &a.output, &mut |p| match p {
        strobe_db::MergeProgress::Started { total_rows, .. } => bar.set_length(total_rows),
        strobe_db::MergeProgress::Copied { rows, .. } => bar.inc(rows),
        strobe_db::MergeProgress::Finishing => bar.set_message("creating indexes and views"),
    });
    bar.finish_and_clear();
    let stats = stats?;
    eprintln!(
        "merged {} files ({} processes, {} rows) into {} in {:.2} s ({:.0} rows/s)",
        stats.inputs,
        stats.processes,
        stats.rows,
        a.output.display(),
        stats.seconds,
        stats.rows as f64 / stats.seconds.max(1e-9)
    );
    Ok(())
}
