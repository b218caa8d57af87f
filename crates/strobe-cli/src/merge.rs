//! `strobe merge`: physical merge of profile databases.
//!
//! Owns the command's arguments and the progress bar; the merge itself is
//! strobe-db's (one output file, or with `--per-node` one file per node,
//! grouped by strobe-db). It never touches the inputs.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

/// Arguments of `strobe merge`.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// Input databases: files, directories (searched for *.db) or globs.
    #[arg(short = 'i', long = "input", required = true, num_args = 1..)]
    pub inputs: Vec<String>,
    /// Output database (must not exist); with --per-node, the directory the
    /// per-node databases go to (created if missing).
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
    /// One merged database per node (`<host>.db`; a node with more than 256
    /// processes is split into `<host>.1.db`, `<host>.2.db`, …): how to merge
    /// the ranks of a large MPI job, whose processes one file cannot hold.
    #[arg(long)]
    pub per_node: bool,
    /// Do not show a progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// Runs `strobe merge`.
pub fn run(a: MergeArgs) -> anyhow::Result<()> {
    let files = strobe_db::inputs::expand_inputs(&a.inputs)?;
    let groups = if a.per_node {
        std::fs::create_dir_all(&a.output)
            .with_context(|| format!("cannot create output directory {}", a.output.display()))?;
        strobe_db::merge::plan_per_node(&files)?
            .into_iter()
            .map(|(name, files)| (a.output.join(name), files))
            .collect()
    } else {
        vec![(a.output.clone(), files)]
    };
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
    let n = groups.len();
    let mut total = strobe_db::MergeStats::default();
    for (k, (output, files)) in groups.iter().enumerate() {
        if n > 1 {
            bar.set_message(format!(
                "{} ({}/{n})",
                output.file_name().unwrap_or_default().to_string_lossy(),
                k + 1
            ));
        }
        bar.set_position(0);
        let stats = strobe_db::merge(files, output, &mut |p| match p {
            strobe_db::MergeProgress::Started { total_rows, .. } => bar.set_length(total_rows),
            strobe_db::MergeProgress::Copied { rows, .. } => bar.inc(rows),
            strobe_db::MergeProgress::Finishing => bar.set_message("creating indexes and views"),
        });
        let stats = match stats {
            Ok(s) => s,
            Err(e) => {
                bar.finish_and_clear();
                return Err(e.into());
            }
        };
        total.inputs += stats.inputs;
        total.processes += stats.processes;
        total.rows += stats.rows;
        total.seconds += stats.seconds;
    }
    bar.finish_and_clear();
    let into = if a.per_node {
        format!("{n} per-node databases in {}", a.output.display())
    } else {
        a.output.display().to_string()
    };
    eprintln!(
        "merged {} files ({} processes, {} rows) into {into} in {:.2} s ({:.0} rows/s)",
        total.inputs,
        total.processes,
        total.rows,
        total.seconds,
        total.rows as f64 / total.seconds.max(1e-9)
    );
    Ok(())
}
