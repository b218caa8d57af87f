//! Parquet datasets: a profile as a directory of Parquet files that
//! DuckDB, Spark, Dask, pandas and pyarrow read directly.
//!
//! Owns [`write_parquet`]: the dataset's layout (one sub-directory per
//! table, hive-partitioned by node and MPI rank,
//! `<table>/node=<host>/rank=<rank>/<guid>.parquet`, one file per process
//! and table, so files never collide), the tables' columns (see
//! docs/parquet.md), and writing it through a staging directory renamed
//! when complete ([`strobe_db::atomic::Partial`]), so that a failed or
//! interrupted conversion never leaves a dataset under the final name.
//! Each process is read through strobe-db
//! ([`strobe_db::process_tables`]: no SQL here) on a connection of its
//! own by a reader thread that hands batches of rows (≤ 64 Ki) to the
//! thread encoding them; a file's row groups (≤ 1 Mi rows) are encoded
//! into memory column by column and spliced into the file, so memory is
//! bounded by a row group's *encoded* size, never by a table's. Processes
//! (or, for a large process, its large tables) are converted by a few
//! workers at once; a large table of samples or counter values is read by
//! several threads taking turns over chunks of row ids (`ranges::Chunks`), so
//! that reading, the slow side, uses the cores and the file keeps the
//! storage order. Every timestamp is written raw and aligned, through
//! [`ProcessClock::align`].
//!
//! It writes through the `parquet` crate's column writers (no Arrow
//! arrays: they cost four times the build time for nothing this needs).
//! It never writes to an input, never leaves a file outside the output
//! directory and its staging directory, and never holds a table in memory
//! (per process: the distinct names, stacks and frames excepted).
//!
//! The parts, each depending only on those before it: `dataset` (tables,
//! marker, options, summary), `columns` (the tables' columns and the
//! batches), `process` (the processes and their clocks), `emit` (a
//! reader's channel to its encoder), `args` (region arguments as
//! columns), `ranges` (samples and counter values by row-id range),
//! `read` (the reader side of a job), `encode` (batches into files),
//! `jobs` (the work and its order), and this module, which runs the jobs
//! and commits the dataset.

mod args;
mod columns;
mod dataset;
mod emit;
mod encode;
mod jobs;
mod process;
mod ranges;
mod read;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use strobe_db::atomic::Partial;
use strobe_db::Profile;

use crate::error::{ExportError, Result};
use columns::ALL;
pub use dataset::{ParquetOptions, ParquetSummary, TableCount, MARKER, TABLES};
use emit::ReadCtx;
use encode::{Counts, TableFormat};
use jobs::{empty_files, job, jobs};
use process::processes;
pub use process::ProcessClock;

/// Whether `dir` is a dataset this exporter wrote (it holds [`MARKER`]).
pub fn is_dataset(dir: &Path) -> bool {
    dir.join(MARKER).is_file()
}

/// An error of the staging directory as an error writing the output.
fn write_err(e: strobe_db::DbError) -> ExportError {
    match e {
        strobe_db::DbError::Io { path, error } => ExportError::Write { path, error },
        e => ExportError::Db(e),
    }
}

fn io_at(path: &Path) -> impl Fn(std::io::Error) -> ExportError + '_ {
    move |e| ExportError::Write {
        path: path.to_path_buf(),
        error: e,
    }
}

/// The dataset's marker file: format, versions, counts.
fn marker_json(s: &ParquetSummary, window: (Option<i64>, Option<i64>)) -> Result<Vec<u8>> {
    let tables: serde_json::Map<String, serde_json::Value> = s
        .tables
        .iter()
        .map(|t| {
            (
                t.table.to_string(),
                serde_json::json!({"rows": t.rows, "files": t.files}),
            )
        })
        .collect();
    Ok(serde_json::to_vec_pretty(&serde_json::json!({
        "format": "strobe-parquet",
        "format_version": 1,
        "strobe_version": env!("CARGO_PKG_VERSION"),
        "partitioning": ["node", "rank"],
        "processes": s.processes,
        "window": {"start": window.0, "end": window.1},
        "tables": tables,
    }))?)
}

/// Writes the profile as a Parquet dataset at `out` with the default
/// [`ParquetOptions`]. See [`write_parquet_with`].
pub fn write_parquet(p: &Profile, out: &Path) -> Result<ParquetSummary> {
    write_parquet_with(p, out, &ParquetOptions::default())
}

/// Writes the profile (its window applied) as a Parquet dataset: the
/// directory `out`, holding one sub-directory per table ([`TABLES`]),
/// each hive-partitioned `node=<hostname>/rank=<MPI rank, -1 when none>`
/// with one file per process, `<guid>.parquet`, and [`MARKER`].
///
/// It is written into `<out>.partial` and renamed to `out` when complete;
/// a failure removes the staging directory. An existing dataset at `out`
/// is replaced; anything else there is an error, before any work.
pub fn write_parquet_with(
    p: &Profile,
    out: &Path,
    opts: &ParquetOptions,
) -> Result<ParquetSummary> {
    out.file_name()
        .and_then(|n| n.to_str())
        .filter(|n| !n.is_empty() && *n != "." && *n != "..")
        .ok_or_else(|| {
            ExportError::Usage(format!(
                "{}: not a usable dataset directory name (give a name such as run.parquet)",
                out.display()
            ))
        })?;
    if out.exists() && !is_dataset(out) {
        return Err(ExportError::Usage(format!(
            "{} exists and is not a strobe Parquet dataset (it has no {MARKER}); remove it or choose another output name",
            out.display()
        )));
    }
    // Written under `<out>.partial`, removed unless renamed at the end.
    let staging = Partial::dir(out).map_err(write_err)?;
    let procs = processes(p)?;
    if procs.is_empty() {
        return Err(ExportError::Empty {
            what: format!("Parquet dataset {}", out.display()),
            needed: "processes".into(),
        });
    }
    let formats = ALL
        .iter()
        .map(|t| TableFormat::new(t))
        .collect::<Result<Vec<_>>>()?;
    let cx = ReadCtx {
        window: p.window(),
        time_kind: p.time_kind()?,
        batch_rows: opts.batch_rows.max(1),
    };
    let opts = ParquetOptions {
        row_group_rows: opts.row_group_rows.max(1),
        ..*opts
    };
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let readers = if opts.readers > 0 {
        opts.readers
    } else {
        cores.clamp(2, 4) / 2 + 1
    };
    let work = jobs(p, &procs, &opts, readers)?;
    let workers = if opts.workers > 0 {
        opts.workers
    } else {
        cores.clamp(1, 8)
    }
    .min(work.len().max(1));
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let first_error: Mutex<Option<ExportError>> = Mutex::new(None);
    let totals: Mutex<Counts> = Mutex::new([(0, 0); 6]);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                let mut counts: Counts = [(0, 0); 6];
                while !failed.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(w) = work.get(i) else {
                        break;
                    };
                    if let Err(e) = job(
                        staging.path(),
                        &formats,
                        &procs[w.process],
                        w,
                        cx,
                        &opts,
                        &mut counts,
                    ) {
                        failed.store(true, Ordering::Relaxed);
                        if let Ok(mut f) = first_error.lock() {
                            f.get_or_insert(e);
                        }
                        break;
                    }
                }
                if let Ok(mut t) = totals.lock() {
                    for (a, b) in t.iter_mut().zip(counts) {
                        a.0 += b.0;
                        a.1 += b.1;
                    }
                }
            });
        }
    });
    if let Some(e) = first_error.into_inner().ok().flatten() {
        return Err(e);
    }
    let mut counts = totals
        .into_inner()
        .map_err(|_| ExportError::Usage("internal: a conversion worker failed".into()))?;
    if let Some(first) = procs.first() {
        empty_files(staging.path(), &formats, first, &mut counts)?;
    }
    let mut summary = ParquetSummary {
        path: out.to_path_buf(),
        processes: procs.len(),
        tables: ALL
            .iter()
            .zip(counts)
            .map(|(t, (rows, files))| TableCount {
                table: t.name,
                rows,
                files,
            })
            .collect(),
    };
    let marker = staging.path().join(MARKER);
    std::fs::write(&marker, marker_json(&summary, cx.window)?).map_err(io_at(&marker))?;
    // Commit: an earlier dataset moves aside, the new one takes its name.
    staging.commit().map_err(write_err)?;
    summary.path = out.to_path_buf();
    Ok(summary)
}
