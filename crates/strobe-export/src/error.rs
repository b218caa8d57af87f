//! Errors of the exporters.
//!
//! Owns [`ExportError`]: every failure an exporter reports, each naming what
//! failed, where, and what to do. It never prints.

use std::path::PathBuf;

/// What can go wrong while exporting.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// Reading the profile database failed.
    #[error(transparent)]
    Db(#[from] strobe_db::DbError),
    /// Writing the output failed.
    #[error("cannot write {path}: {error} (check the output directory exists, is writable and has space)")]
    Write {
        /// Output file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        error: std::io::Error,
    },
    /// The output stream failed (no file name known).
    #[error("cannot write the output: {0}")]
    Io(#[from] std::io::Error),
    /// A format name that strobe does not know.
    #[error(
        "unknown output format '{0}' (known: pftrace, json, folded, svg, pprof, firefox, csv, parquet)"
    )]
    UnknownFormat(String),
    /// The profile holds nothing the chosen format can show.
    #[error("{what}: the profile holds no {needed} (record with `strobe sample` or enable tracing, or widen --start/--end)")]
    Empty {
        /// Which export.
        what: String,
        /// What it needed.
        needed: String,
    },
    /// A region argument or other JSON failed to serialise.
    #[error("cannot serialise JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// The flamegraph renderer failed.
    #[error("flamegraph rendering failed: {0}")]
    Flamegraph(String),
    /// Inconsistent request (e.g. a diff without two inputs).
    #[error("{0}")]
    Usage(String),
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, ExportError>;
