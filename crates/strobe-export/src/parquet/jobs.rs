//! The work of a conversion: jobs, each read by its reader threads and
//! encoded on the thread that runs it.
//!
//! Owns [`jobs`] (per process its tables; a large process's large tables
//! each on their own, samples and counter values read in chunks by
//! several threads; largest first), running one ([`job`]) and the empty
//! files of tables no process wrote ([`empty_files`]). It never reads the
//! tables itself and never commits the dataset.

use std::fs::File;
use std::path::Path;
use std::sync::mpsc::{channel, sync_channel};

use parquet::file::writer::SerializedFileWriter;
use strobe_db::Profile;

use super::columns::{
    Batch, TableId, ALL, T_COUNTERS, T_PROCESSES, T_REGIONS, T_SAMPLES, T_STACKS, T_THREADS,
};
use super::dataset::ParquetOptions;
use super::emit::{Link, Msg, ReadCtx};
use super::encode::{file_path, pq_err, write_file, Counts, Ends, Feed, Next, TableFormat};
use super::process::Proc;
use super::ranges::{chunk_reader, Chunks};
use super::read::reader;
use crate::error::{ExportError, Result};

/// One unit of work: tables of one process, or one large table in chunks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Job {
    pub(super) process: usize,
    pub(super) tables: Vec<TableId>,
    pub(super) chunks: Option<Chunks>,
}

/// Converts one job: reader threads read, this thread encodes. Files are
/// created with a table's first row (an empty table writes no file).
pub(super) fn job(
    root: &Path,
    formats: &[TableFormat],
    pr: &Proc,
    job: &Job,
    cx: ReadCtx,
    opts: &ParquetOptions,
    counts: &mut Counts,
) -> Result<()> {
    let readers = job.chunks.map_or(1, |c| c.readers.max(1));
    let (mut links, mut rxs, mut spare) = (Vec::new(), Vec::new(), Vec::new());
    for origin in 0..readers {
        let (tx, rx) = sync_channel::<Msg>(2);
        let (spare_tx, spare_rx) = channel::<Batch>();
        links.push(Link {
            tx,
            spare: spare_rx,
            origin,
        });
        rxs.push(rx);
        spare.push(spare_tx);
    }
    let feed = match job.chunks {
        Some(c) => Feed::Chunks {
            table: job.tables[0],
            rxs,
            next: 0,
            count: c.count,
            begun: false,
        },
        None => Feed::One(
            rxs.pop()
                .ok_or_else(|| ExportError::Usage("internal: no reader".into()))?,
        ),
    };
    let mut ends = Ends { feed, spare };
    std::thread::scope(|s| -> Result<()> {
        let mut threads = Vec::new();
        for link in links {
            let b = std::thread::Builder::new().name("strobe-parquet-reader".into());
            threads.push(match job.chunks {
                Some(c) => {
                    let t = job.tables[0];
                    b.spawn_scoped(s, move || chunk_reader(pr, t, cx, c, link))?
                }
                None => b.spawn_scoped(s, move || reader(pr, &job.tables, cx, link))?,
            });
        }
        let result = (|| -> Result<()> {
            let mut current: Option<TableId> = None;
            let mut pending: Option<Msg> = None;
            loop {
                let m = match pending.take() {
                    Some(m) => m,
                    None => match ends.recv() {
                        Some(m) => m,
                        None => return Ok(()),
                    },
                };
                match m {
                    Msg::Begin(t) => current = Some(t),
                    Msg::Batch(b) => {
                        let Some(t) = current else {
                            return Err(ExportError::Usage("internal: rows before a table".into()));
                        };
                        let table = ALL[t];
                        let path = file_path(root, table, pr);
                        let (rows, next) = write_file(
                            &path,
                            &formats[t],
                            pr,
                            table,
                            b,
                            &mut ends,
                            opts.row_group_rows,
                        )?;
                        match next {
                            Next::Msg(Msg::Discard) => {
                                std::fs::remove_file(&path).map_err(|e| ExportError::Write {
                                    path: path.clone(),
                                    error: e,
                                })?;
                            }
                            Next::Msg(m) => {
                                counts[t].0 += rows;
                                counts[t].1 += 1;
                                pending = Some(m);
                            }
                            Next::Gone => {
                                return Err(ExportError::Usage(format!(
                                    "internal: the reader of {} stopped while writing {}",
                                    pr.guid,
                                    path.display()
                                )))
                            }
                        }
                    }
                    Msg::Discard | Msg::End => {}
                    Msg::Failed(e) => return Err(e),
                }
            }
        })();
        // Dropping the receivers unblocks readers still sending.
        drop(ends);
        let joined: Vec<_> = threads.into_iter().map(|t| t.join()).collect();
        result?;
        if joined.iter().any(|j| j.is_err()) {
            return Err(ExportError::Usage(format!(
                "internal: a reader of process {} failed",
                pr.guid
            )));
        }
        Ok(())
    })
}

/// Writes an empty file (schema only) for each table no process wrote,
/// so that every table of the dataset can be read.
pub(super) fn empty_files(
    root: &Path,
    formats: &[TableFormat],
    first: &Proc,
    counts: &mut Counts,
) -> Result<()> {
    for (t, table) in ALL.iter().enumerate() {
        if counts[t].1 > 0 {
            continue;
        }
        let path = file_path(root, table, first);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| ExportError::Write {
                path: dir.to_path_buf(),
                error: e,
            })?;
        }
        let file = File::create(&path).map_err(|e| ExportError::Write {
            path: path.clone(),
            error: e,
        })?;
        let fw =
            SerializedFileWriter::new(file, formats[t].schema.clone(), formats[t].props.clone())
                .map_err(pq_err(&path))?;
        fw.close().map_err(pq_err(&path))?;
        counts[t].1 += 1;
    }
    Ok(())
}

/// Chunks per reader thread below which a table is read by one thread.
pub(super) const CHUNKS_PER_READER: usize = 4;

/// The jobs: per process, its tables; a large process's large tables
/// each on their own (samples and counters read by `readers` threads),
/// largest first.
pub(super) fn jobs(
    p: &Profile,
    procs: &[Proc],
    opts: &ParquetOptions,
    readers: usize,
) -> Result<Vec<Job>> {
    let split = opts.split_rows.min(i64::MAX as u64) as i64;
    let mut sized = Vec::new();
    for (k, pr) in procs.iter().enumerate() {
        // Per table, the first and last row id.
        let b = p.row_id_bounds(&pr.source)?;
        let big = [
            (T_SAMPLES, b.samples),
            (T_REGIONS, b.regions),
            (T_COUNTERS, b.counters),
        ];
        let span = |(lo, hi): (i64, i64)| (hi - lo + 1).max(0);
        let total: i64 = big.iter().map(|b| span(b.1)).sum();
        if total <= split {
            sized.push((
                total,
                Job {
                    process: k,
                    tables: (0..ALL.len()).collect(),
                    chunks: None,
                },
            ));
            continue;
        }
        let mut rest = vec![T_PROCESSES, T_THREADS, T_STACKS];
        for (t, range) in big {
            let n = span(range);
            if n <= split / 4 {
                rest.push(t);
                continue;
            }
            let size = opts.batch_rows.max(1) as i64;
            let count = ((n + size - 1) / size) as usize;
            let chunks = (t != T_REGIONS && readers > 1 && count >= CHUNKS_PER_READER * readers)
                .then_some(Chunks {
                    first: range.0,
                    size,
                    count,
                    readers,
                });
            sized.push((
                n,
                Job {
                    process: k,
                    tables: vec![t],
                    chunks,
                },
            ));
        }
        rest.sort_unstable();
        sized.push((
            0,
            Job {
                process: k,
                tables: rest,
                chunks: None,
            },
        ));
    }
    sized.sort_by_key(|(n, j)| (std::cmp::Reverse(*n), j.process));
    Ok(sized.into_iter().map(|(_, j)| j).collect())
}
