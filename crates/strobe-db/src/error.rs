//! Errors of the profile database.
//!
//! Owns the one error type every strobe-db function returns. Each variant
//! names the file it concerns and says what is wrong in words a user can act
//! on; it must never hide SQLite's own message.

use std::path::PathBuf;

/// Everything that can go wrong while writing, reading, merging or
/// summarising profile databases.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// The file does not start with the SQLite header: it is not a database.
    #[error("{path}: not an SQLite database (the file does not start with the SQLite header); pass a strobe or rocpd .db file")]
    NotSqlite {
        /// The offending file.
        path: PathBuf,
    },
    /// The file is shorter than its header says, or SQLite reports corruption.
    #[error("{path}: truncated or corrupt database ({detail}); the writer was probably killed before its first flush or the file was cut while copying")]
    Corrupt {
        /// The offending file.
        path: PathBuf,
        /// What was found.
        detail: String,
    },
    /// The file was written by a newer schema than this strobe understands.
    #[error("{path}: schema version {found} is newer than the version {supported} this strobe reads; upgrade strobe")]
    NewerSchema {
        /// The offending file.
        path: PathBuf,
        /// Version stored in the file.
        found: i64,
        /// Highest version this build understands.
        supported: i64,
    },
    /// A table the schema requires is missing.
    #[error("{path}: required table `{table}` is missing; the file is not a complete strobe/rocpd profile")]
    MissingTable {
        /// The offending file.
        path: PathBuf,
        /// The missing table (with its suffix when known).
        table: String,
    },
    /// The file holds no `rocpd_metadata_<uuid>` table at all.
    #[error(
        "{path}: no rocpd_metadata table: this SQLite file is not a strobe/rocpd profile database"
    )]
    NotProfile {
        /// The offending file.
        path: PathBuf,
    },
    /// An input path, directory or glob matched no database file.
    #[error("{pattern}: no database file matches; give .db files, directories holding them, or glob patterns")]
    NoInput {
        /// The pattern as given.
        pattern: String,
    },
    /// Two inputs hold the same process (same uuid suffix).
    #[error("{path}: process suffix {suffix} is already present in another input; the same process database was given twice")]
    DuplicateProcess {
        /// The second file holding the suffix.
        path: PathBuf,
        /// The duplicated suffix.
        suffix: String,
    },
    /// More processes than one merged file holds.
    #[error("the inputs hold {processes} processes; one merged file holds at most {limit} (each process adds about thirty tables, and SQLite slows down with every table a file holds): merge one file per node with `strobe merge --per-node -o DIR`, or give the databases themselves to query, summary and convert, which read any number of them")]
    TooManyProcesses {
        /// Processes in the inputs.
        processes: usize,
        /// The most one merged file holds ([`crate::merge::MAX_MERGED_PROCESSES`]).
        limit: usize,
    },
    /// SQLite rejected a user-supplied query.
    #[error("SQL error: {message}\n  in query: {sql}")]
    Query {
        /// SQLite's message.
        message: String,
        /// The query as given.
        sql: String,
    },
    /// A time bound (`--start/--end`) could not be understood or resolved.
    #[error("invalid time bound `{0}`: give nanoseconds (e.g. 1500000) or a percentage of the run (e.g. 25%)")]
    TimeBound(String),
    /// `--end` comes before `--start`.
    #[error("the time window ends before it starts (start {start}, end {end}): give an end after the start")]
    InvertedWindow {
        /// The start as given.
        start: String,
        /// The end as given.
        end: String,
    },
    /// An SQLite error while working on a file.
    #[error("{path}: {error}")]
    Sqlite {
        /// The file concerned.
        path: PathBuf,
        /// SQLite's error (its text is part of this error's message).
        error: rusqlite::Error,
    },
    /// An I/O error on a file.
    #[error("{path}: {error}")]
    Io {
        /// The file concerned.
        path: PathBuf,
        /// The I/O error (its text is part of this error's message).
        error: std::io::Error,
    },
    /// The writer was used after an earlier error left it unusable.
    #[error("{path}: the writer is closed after an earlier error")]
    Closed {
        /// The database file.
        path: PathBuf,
    },
    /// A sink of [`crate::Profile::visit`] failed; the visit returns the
    /// sink's own error instead of this one.
    #[error("the consumer of the profile stopped reading")]
    SinkStopped,
}

/// Result alias for strobe-db.
pub type Result<T, E = DbError> = std::result::Result<T, E>;

/// Attaches a path to rusqlite errors.
pub(crate) trait SqlContext<T> {
    /// Converts the error into [`DbError::Sqlite`] naming `path`, or into
    /// [`DbError::Corrupt`] when SQLite reports a corrupt or non-database file.
    fn at(self, path: &std::path::Path) -> Result<T>;
}

impl<T> SqlContext<T> for std::result::Result<T, rusqlite::Error> {
    fn at(self, path: &std::path::Path) -> Result<T> {
        self.map_err(|e| classify(e, path))
    }
}

/// Maps an SQLite error to the most specific [`DbError`].
pub(crate) fn classify(e: rusqlite::Error, path: &std::path::Path) -> DbError {
    use rusqlite::ffi::ErrorCode;
    if let rusqlite::Error::SqliteFailure(f, _) = &e {
        match f.code {
            ErrorCode::NotADatabase => {
                return DbError::NotSqlite {
                    path: path.to_path_buf(),
                }
            }
            ErrorCode::DatabaseCorrupt => {
                return DbError::Corrupt {
                    path: path.to_path_buf(),
                    detail: e.to_string(),
                }
            }
            _ => {}
        }
    }
    DbError::Sqlite {
        path: path.to_path_buf(),
        error: e,
    }
}
