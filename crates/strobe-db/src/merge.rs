//! Physical merge of profile databases into one file.
//!
//! Owns copying every process's suffixed tables (rows, ids and guid
//! unchanged; optional tables where an input has them) from many inputs
//! into one output, then creating the unsuffixed `UNION ALL` views, the
//! standard views and the indexes, and grouping inputs by node for one
//! merged file per node ([`plan_per_node`]). It attaches one input at a
//! time and streams it into the output, so memory does not grow with the
//! inputs; one output holds at most [`MAX_MERGED_PROCESSES`] processes
//! (every `CREATE TABLE` rescans the schema, so the cost grows with the
//! square of the tables, and a `UNION ALL` view takes at most 500 terms).
//! It writes to a `.partial` file renamed into place only when complete
//! ([`crate::atomic::Partial`]): a
//! plain rollback-journal file with mode 0644, nothing beside it. It opens
//! inputs read-only (never creating a file beside one), never modifies an
//! input and never prints: progress goes to the caller's callback.

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

/// The most processes one merged file holds (see the module
/// documentation); [`merge`] refuses more.
pub const MAX_MERGED_PROCESSES: usize = 256;

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
    if seen.len() > MAX_MERGED_PROCESSES {
        return Err(DbError::TooManyProcesses {
            processes: seen.len(),
            limit: MAX_MERGED_PROCESSES,
        });
    }
    progress(MergeProgress::Started {
        inputs: inputs.len(),
        total_rows,
    });

    // Written under `<output>.partial`, removed unless renamed at the end.
    let staged = crate::atomic::Partial::file(output);
    let partial = staged.path().to_path_buf();
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
    let mut stats = result?;
    staged.commit()?;
    stats.seconds = started.elapsed().as_secs_f64();
    Ok(stats)
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

/// Groups `inputs` for one merged file per node: by the host name each
/// database records (`rocpd_info_node`), in input order, a node with more
/// than [`MAX_MERGED_PROCESSES`] processes split in as many groups as it
/// needs. Returns (output file name, inputs) pairs: `<host>.db`, or
/// `<host>.1.db`, `<host>.2.db`, … for a split node; characters other than
/// letters, digits, `.`, `-` and `_` in a host name become `_`. Every input
/// is checked first (a bad one is named); a database holding more processes
/// than one output may is refused.
pub fn plan_per_node(inputs: &[PathBuf]) -> Result<Vec<(String, Vec<PathBuf>)>> {
    // Host → groups of (files, processes).
    type Groups = Vec<(Vec<PathBuf>, usize)>;
    let mut nodes: Vec<(String, Groups)> = Vec::new();
    for input in inputs {
        let suffixes = check_file(input)?;
        if suffixes.len() > MAX_MERGED_PROCESSES {
            return Err(DbError::TooManyProcesses {
                processes: suffixes.len(),
                limit: MAX_MERGED_PROCESSES,
            });
        }
        let host: Option<String> = {
            let conn = open_read_only(input)?;
            conn.query_row(
                &format!(
                    "SELECT hostname FROM \"rocpd_info_node{}\" ORDER BY id LIMIT 1",
                    suffixes[0]
                ),
                [],
                |r| r.get(0),
            )
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(None),
                e => Err(e),
            })
            .at(input)?
        };
        let host: String = host
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "unknown-host".into())
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let at = match nodes.iter().position(|(h, _)| *h == host) {
            Some(at) => at,
            None => {
                nodes.push((host, Vec::new()));
                nodes.len() - 1
            }
        };
        let groups = &mut nodes[at].1;
        match groups.last_mut() {
            Some((files, n)) if *n + suffixes.len() <= MAX_MERGED_PROCESSES => {
                files.push(input.clone());
                *n += suffixes.len();
            }
            _ => groups.push((vec![input.clone()], suffixes.len())),
        }
    }
    let mut out = Vec::new();
    for (host, groups) in nodes {
        let split = groups.len() > 1;
        for (k, (files, _)) in groups.into_iter().enumerate() {
            let name = if split {
                format!("{host}.{}.db", k + 1)
            } else {
                format!("{host}.db")
            };
            out.push((name, files));
        }
    }
    Ok(out)
}
