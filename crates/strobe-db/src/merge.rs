//! Physical merge of profile databases into one file.
//!
//! Owns copying every process's suffixed tables (rows, ids and guid
//! unchanged; optional tables where an input has them) from many inputs
//! into one output, then creating the unsuffixed `UNION ALL` views, the
//! standard views and the indexes. It attaches one
//! input at a time, so any number of inputs works, and writes to a
//! `.partial` file renamed into place only when complete: a plain
//! rollback-journal file with mode 0644, nothing beside it. It opens inputs
//! read-only (never creating a file beside one), never modifies an input and
//! never prints: progress goes to the caller's callback.

use std::path::{Path, PathBuf};
use std::time::Instant;

use rusqlite::Connection;

use crate::error::{DbError, Result, SqlContext};
use crate::inputs::{check_file, open_read_only, read_only_uri};
use crate::schema::{self, TableSet, ViewWindow};

/// Progress reported while merging.
#[derive(Debug, Clone)]
pub enum MergeProgress {
    /// Inputs checked; `total_rows` rows will be copied.
    Started {
        /// Number of input files.
        inputs: usize,
        /// Rows to copy, all inputs together.
        total_rows: u64,
    },
    /// One table of one process copied.
    Copied {
        /// Input file.
        input: PathBuf,
        /// Rows copied by this step.
        rows: u64,
    },
    /// All rows are in; indexes and views are being created.
    Finishing,
}

/// What a merge did.
#[derive(Debug, Clone, Default)]
pub struct MergeStats {
    /// Input files merged.
    pub inputs: usize,
    /// Processes (suffixes) in the output.
    pub processes: usize,
    /// Rows copied.
    pub rows: u64,
    /// Seconds spent.
    pub seconds: f64,
}

/// Merges `inputs` into a new database at `output`. Every input is checked
/// first (a bad one stops the merge before anything is written, naming the
/// file); two inputs holding the same process are refused. Fails if `output`
/// exists.
pub fn merge(
    inputs: &[PathBuf],
    output: &Path,
    progress: &mut dyn FnMut(MergeProgress),
) -> Result<MergeStats> {
    let started = Instant::now();
    if output.exists() {
        return Err(DbError::Io {
            path: output.to_path_buf(),
            error: std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "output exists; remove it or choose another path",
            ),
        });
    }
    let mut plan: Vec<(PathBuf, Vec<String>)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut total_rows = 0u64;
    for input in inputs {
        let suffixes = check_file(input)?;
        for s in &suffixes {
            if !seen.insert(s.clone()) {
                return Err(DbError::DuplicateProcess {
                    path: input.clone(),
                    suffix: s.clone(),
                });
            }
        }
        total_rows += count_rows(input, &suffixes)?;
        plan.push((input.clone(), suffixes));
    }
    progress(MergeProgress::Started {
        inputs: inputs.len(),
        total_rows,
    });

    let partial = {
        let mut p = output.as_os_str().to_owned();
        p.push(".partial");
        PathBuf::from(p)
    };
    let _ = std::fs::remove_file(&partial);
    let result = (|| -> Result<MergeStats> {
        crate::writer::create_exclusive(&partial)?;
        let conn = Connection::open(&partial).at(&partial)?;
        conn.execute_batch("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA cache_size=-65536; PRAGMA temp_store=FILE;")
            .at(&partial)?;
        let mut rows = 0u64;
        let mut sets = Vec::new();
        for (input, suffixes) in &plan {
            conn.execute("ATTACH DATABASE ?1 AS src", [read_only_uri(input)])
                .at(input)?;
            conn.execute_batch("BEGIN").at(&partial)?;
            for s in suffixes {
                // Optional tables only where the input has them (files
                // written before a table existed lack it).
                let mut tables: Vec<&str> = schema::all_tables().collect();
                for (t, _) in schema::OPTIONAL_TABLES {
                    if schema::has_table(&conn, "src", &format!("{t}{s}")).at(input)? {
                        tables.push(t);
                    }
                }
                for t in tables {
                    let name = format!("{t}{s}");
                    let ddl: String = conn
                        .query_row(
                            "SELECT sql FROM src.sqlite_master WHERE type = 'table' AND name = ?1",
                            [&name],
                            |r| r.get(0),
                        )
                        .at(input)?;
                    conn.execute_batch(&ddl).at(&partial)?;
                    let columns = stored_columns(&conn, &name).at(&partial)?;
                    let n = conn
                        .execute(
                            &format!("INSERT INTO main.\"{name}\" ({columns}) SELECT {columns} FROM src.\"{name}\""),
                            [],
                        )
                        .at(input)? as u64;
                    rows += n;
                    progress(MergeProgress::Copied {
                        input: input.clone(),
                        rows: n,
                    });
                }
                sets.push(TableSet {
                    schema: "main".into(),
                    suffix: s.clone(),
                });
            }
            conn.execute_batch("COMMIT").at(&partial)?;
            conn.execute_batch("DETACH DATABASE src").at(input)?;
        }
        progress(MergeProgress::Finishing);
        conn.execute_batch("BEGIN").at(&partial)?;
        schema::create_views(&conn, &sets, false, &ViewWindow::default()).at(&partial)?;
        for s in &sets {
            schema::create_indexes(&conn, &s.suffix).at(&partial)?;
        }
        conn.execute_batch("COMMIT; PRAGMA journal_mode=DELETE;")
            .at(&partial)?;
        Ok(MergeStats {
            inputs: plan.len(),
            processes: sets.len(),
            rows,
            seconds: 0.0,
        })
    })();
    match result {
        Ok(mut stats) => {
            std::fs::rename(&partial, output).map_err(|e| DbError::Io {
                path: output.to_path_buf(),
                error: e,
            })?;
            stats.seconds = started.elapsed().as_secs_f64();
            Ok(stats)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            Err(e)
        }
    }
}

/// Counts the rows of every suffixed table of `path` (for progress).
fn count_rows(path: &Path, suffixes: &[String]) -> Result<u64> {
    let conn = open_read_only(path)?;
    let mut total = 0u64;
    for s in suffixes {
        let optional = schema::OPTIONAL_TABLES
            .iter()
            .map(|(t, _)| *t)
            .filter(|t| schema::has_table(&conn, "main", &format!("{t}{s}")).unwrap_or(false));
        for t in schema::all_tables().chain(optional) {
            // max(id) is O(log n) on an AUTOINCREMENT primary key and equals
            // the row count for append-only tables; good enough for progress.
            let n: Option<i64> = conn
                .query_row(&format!("SELECT max(rowid) FROM \"{t}{s}\""), [], |r| {
                    r.get(0)
                })
                .at(path)?;
            total += n.unwrap_or(0).max(0) as u64;
        }
    }
    Ok(total)
}

/// The stored (not generated) columns of table `name` in `main`, quoted
/// and comma-separated: what an `INSERT … SELECT` may name.
fn stored_columns(conn: &Connection, name: &str) -> rusqlite::Result<String> {
    let mut st = conn.prepare("SELECT name FROM pragma_table_info(?1)")?;
    let names = st
        .query_map([name], |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(names
        .iter()
        .map(|n| format!("\"{}\"", n.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(", "))
}
