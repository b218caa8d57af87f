//! What a Parquet dataset is and what was written into one.
//!
//! Owns the names of a dataset's tables ([`TABLES`]), the file that marks
//! a dataset complete ([`MARKER`]), how a dataset is written
//! ([`ParquetOptions`]) and what a conversion reports ([`ParquetSummary`]).
//! It never reads a profile and never writes a file.

use std::path::PathBuf;

/// The tables of a dataset, in the order they are written.
pub const TABLES: &[&str] = &[
    "processes",
    "threads",
    "regions",
    "samples",
    "stacks",
    "counters",
];

/// The file at a dataset's top level that marks it complete (JSON: the
/// format, strobe's version, the row and file counts per table).
pub const MARKER: &str = "_strobe.json";

/// How a dataset is written (the defaults suit every profile; tests use
/// small sizes to exercise several batches and row groups).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParquetOptions {
    /// Rows per batch handed from a reader thread to its encoder.
    pub batch_rows: usize,
    /// Rows per row group (rounded up to whole batches).
    pub row_group_rows: usize,
    /// Processes (or large tables) converted at once; 0: one per core, at
    /// most eight.
    pub workers: usize,
    /// Rows (samples, regions and counter values) above which a process's
    /// large tables are converted as jobs of their own.
    pub split_rows: u64,
    /// Threads reading one large table of samples or counter values
    /// (in turns, a batch each); 0: by the cores, two to three.
    pub readers: usize,
}

impl Default for ParquetOptions {
    fn default() -> Self {
        ParquetOptions {
            batch_rows: 65_536,
            row_group_rows: 1 << 20,
            workers: 0,
            split_rows: 200_000,
            readers: 0,
        }
    }
}

/// What was written for one table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableCount {
    /// The table's name (its sub-directory).
    pub table: &'static str,
    /// Rows in all its files.
    pub rows: u64,
    /// Files written.
    pub files: u64,
}

/// What [`super::write_parquet`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParquetSummary {
    /// The dataset directory.
    pub path: PathBuf,
    /// Processes converted.
    pub processes: usize,
    /// Per table, in [`TABLES`] order.
    pub tables: Vec<TableCount>,
}

impl ParquetSummary {
    /// Rows of `table` (0 for an unknown name).
    pub fn rows(&self, table: &str) -> u64 {
        self.tables
            .iter()
            .find(|t| t.table == table)
            .map_or(0, |t| t.rows)
    }

    /// Rows of every table.
    pub fn total_rows(&self) -> u64 {
        self.tables.iter().map(|t| t.rows).sum()
    }
}
