//! Finding and checking input database files.
//!
//! Owns turning user-given inputs (files, directories, glob patterns) into a
//! sorted list of database files, and checking each one before use: SQLite
//! header, truncation, strobe/rocpd tables, schema version. It also owns how
//! every reader in this crate opens a file: read-only, creating nothing
//! beside it ([`open_read_only`], [`read_only_uri`]). It never modifies an
//! input.
//!
//! A finished profile is in rollback-journal mode and opens read-only
//! anywhere, including from a read-only directory. A file still in WAL mode
//! whose `-wal` file is gone (its writer closed it without
//! [`crate::Writer::finish`]) is opened `immutable`, because a read-only
//! SQLite connection would otherwise create `-wal` and `-shm` files beside
//! it and could not remove them. A file whose `-wal` file is present (a
//! writer still running, or killed) is opened read-only in WAL mode: SQLite
//! then needs the `-shm` file, and creates it if missing, which requires a
//! writable directory.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

use crate::error::{DbError, Result, SqlContext};
use crate::schema::{self, SCHEMA_VERSION};

/// Expands inputs into database files: a file is taken as is, a directory
/// is searched recursively for `*.db` files, anything holding `*`, `?` or
/// `[` is a glob pattern. The search does not descend into symlinked
/// directories (such as a run directory's `latest`), though a symlink given
/// as an input is followed. The result is sorted and free of duplicates,
/// also of one file reached under two names (the first name is kept); an
/// input that yields nothing is an error.
pub fn expand_inputs<S: AsRef<str>>(inputs: &[S]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for input in inputs {
        let input = input.as_ref();
        let before = out.len();
        let p = Path::new(input);
        if p.is_dir() {
            walk_dir(p, &mut out)?;
        } else if input.contains(['*', '?', '[']) && !p.exists() {
            let paths = glob::glob(input).map_err(|_| DbError::NoInput {
                pattern: input.to_string(),
            })?;
            for entry in paths.flatten() {
                if entry.is_dir() {
                    walk_dir(&entry, &mut out)?;
                } else {
                    out.push(entry);
                }
            }
        } else if p.exists() {
            out.push(p.to_path_buf());
        } else {
            return Err(DbError::Io {
                path: p.to_path_buf(),
                error: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no such file or directory",
                ),
            });
        }
        if out.len() == before {
            return Err(DbError::NoInput {
                pattern: input.to_string(),
            });
        }
    }
    out.sort();
    out.dedup();
    let mut seen = std::collections::HashSet::new();
    out.retain(|p| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(p).map_or(true, |m| seen.insert((m.dev(), m.ino())))
    });
    Ok(out)
}

fn walk_dir(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let rd = std::fs::read_dir(dir).map_err(|e| DbError::Io {
        path: dir.to_path_buf(),
        error: e,
    })?;
    for entry in rd {
        let entry = entry.map_err(|e| DbError::Io {
            path: dir.to_path_buf(),
            error: e,
        })?;
        let path = entry.path();
        // file_type() does not follow symlinks: a symlinked directory is
        // skipped (no file twice through `latest`, no endless loop).
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir {
            walk_dir(&path, out)?;
        } else if !path.is_dir() && path.extension().is_some_and(|e| e == "db") {
            out.push(path);
        }
    }
    Ok(())
}

/// Percent-encodes a path for an SQLite `file:` URI.
pub(crate) fn file_uri(path: &Path, params: &str) -> String {
    let mut s = String::from("file:");
    for b in path.as_os_str().as_encoded_bytes() {
        match *b {
            b'%' | b'?' | b'#' | b'&' | b'=' | b' ' | 0x80..=0xff => {
                s.push_str(&format!("%{b:02X}"))
            }
            c => s.push(c as char),
        }
    }
    s.push('?');
    s.push_str(params);
    s
}

/// The `-wal` file SQLite keeps beside `path` in WAL mode.
fn wal_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push("-wal");
    PathBuf::from(p)
}

/// Whether the header of `path` says WAL mode (file format versions 2 at
/// offsets 18 and 19). Unreadable or short files are "no".
pub(crate) fn header_says_wal(path: &Path) -> bool {
    use std::io::Read;
    let mut h = [0u8; 20];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut h))
        .is_ok()
        && &h[..16] == b"SQLite format 3\0"
        && h[18] == 2
        && h[19] == 2
}

/// The `file:` URI that opens `path` read-only without creating anything
/// beside it (see the module documentation): `mode=ro`, plus `immutable=1`
/// for a WAL-mode file without its `-wal` file.
pub fn read_only_uri(path: &Path) -> String {
    if header_says_wal(path) && !wal_path(path).exists() {
        file_uri(path, "mode=ro&immutable=1")
    } else {
        file_uri(path, "mode=ro")
    }
}

/// Opens `path` read-only (see [`read_only_uri`]). The file must exist;
/// nothing is created.
pub fn open_read_only(path: &Path) -> Result<Connection> {
    Connection::open_with_flags(
        read_only_uri(path),
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .at(path)
}

/// Checks the first bytes of a file: SQLite magic and, when the header's
/// page count is valid, that the file is as long as the header says.
fn check_header(path: &Path) -> Result<()> {
    use std::io::Read;
    let io = |e| DbError::Io {
        path: path.to_path_buf(),
        error: e,
    };
    let mut f = std::fs::File::open(path).map_err(io)?;
    let len = f.metadata().map_err(io)?.len();
    if len == 0 {
        return Err(DbError::NotProfile {
            path: path.to_path_buf(),
        });
    }
    let mut h = [0u8; 100];
    let n = f.read(&mut h).map_err(io)?;
    if n < 16 || &h[..16] != b"SQLite format 3\0" {
        return Err(DbError::NotSqlite {
            path: path.to_path_buf(),
        });
    }
    if n < 100 {
        return Err(DbError::Corrupt {
            path: path.to_path_buf(),
            detail: format!("file is only {len} bytes, shorter than the 100-byte header"),
        });
    }
    let page_size = match u16::from_be_bytes([h[16], h[17]]) {
        1 => 65536u64,
        p => u64::from(p),
    };
    let pages = u64::from(u32::from_be_bytes([h[28], h[29], h[30], h[31]]));
    let valid = h[24..28] == h[92..96];
    if valid && pages > 0 && len < page_size * pages {
        return Err(DbError::Corrupt {
            path: path.to_path_buf(),
            detail: format!("file holds {len} bytes but its header describes {pages} pages of {page_size} bytes"),
        });
    }
    Ok(())
}

/// The process suffixes present in schema `schema` of `conn` (one per
/// `rocpd_metadata_<uuid>` table), sorted.
pub fn suffixes_in(conn: &Connection, schema: &str) -> rusqlite::Result<Vec<String>> {
    let mut st = conn.prepare(&format!(
        "SELECT name FROM \"{schema}\".sqlite_master WHERE type = 'table' AND name LIKE 'rocpd\\_metadata\\_%' ESCAPE '\\' ORDER BY name"
    ))?;
    let names = st.query_map([], |r| r.get::<_, String>(0))?;
    let mut out = Vec::new();
    for n in names {
        let n = n?;
        let s = &n["rocpd_metadata".len()..];
        if crate::identity::is_suffix(s) {
            out.push(s.to_string());
        }
    }
    Ok(out)
}

/// Checks that schema `schema` of `conn` (the file `path`) is a strobe
/// profile: returns its suffixes after verifying the schema version and that
/// every rocpd and strobe table exists for each suffix.
pub(crate) fn check_schema(conn: &Connection, schema: &str, path: &Path) -> Result<Vec<String>> {
    let suffixes = suffixes_in(conn, schema).at(path)?;
    if suffixes.is_empty() {
        return Err(DbError::NotProfile {
            path: path.to_path_buf(),
        });
    }
    let mut tables = std::collections::HashSet::new();
    {
        let mut st = conn
            .prepare(&format!(
                "SELECT name FROM \"{schema}\".sqlite_master WHERE type = 'table'"
            ))
            .at(path)?;
        let rows = st.query_map([], |r| r.get::<_, String>(0)).at(path)?;
        for r in rows {
            tables.insert(r.at(path)?);
        }
    }
    for s in &suffixes {
        let version: Option<String> = conn
            .query_row(
                &format!("SELECT value FROM \"{schema}\".\"rocpd_metadata{s}\" WHERE tag = 'schema_version'"),
                [],
                |r| r.get(0),
            )
            .map(Some)
            .or_else(|e| if matches!(e, rusqlite::Error::QueryReturnedNoRows) { Ok(None) } else { Err(e) })
            .at(path)?;
        let found: i64 = version
            .as_deref()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        if found > SCHEMA_VERSION {
            return Err(DbError::NewerSchema {
                path: path.to_path_buf(),
                found,
                supported: SCHEMA_VERSION,
            });
        }
        for t in schema::all_tables() {
            let name = format!("{t}{s}");
            if !tables.contains(&name) {
                return Err(DbError::MissingTable {
                    path: path.to_path_buf(),
                    table: name,
                });
            }
        }
    }
    Ok(suffixes)
}

/// Fully checks one database file (header, then schema) and returns its
/// process suffixes.
pub fn check_file(path: &Path) -> Result<Vec<String>> {
    check_header(path)?;
    let conn = open_read_only(path)?;
    check_schema(&conn, "main", path).map_err(|e| explain_wal(path, e))
}

/// Replaces SQLite's bare "unable to open database file" by the reason when
/// it is the one a read-only reader meets: a WAL-mode file whose `-shm` file
/// is missing and cannot be created.
fn explain_wal(path: &Path, e: DbError) -> DbError {
    let cannot_open = matches!(
        &e,
        DbError::Sqlite { error: rusqlite::Error::SqliteFailure(f, _), .. }
            if f.code == rusqlite::ErrorCode::CannotOpen
    );
    let mut shm = path.as_os_str().to_owned();
    shm.push("-shm");
    if !cannot_open || !wal_path(path).exists() || Path::new(&shm).exists() {
        return e;
    }
    DbError::Io {
        path: path.to_path_buf(),
        error: std::io::Error::other(format!(
            "the file is still in WAL mode (its writer is running or was killed) and reading it needs {} beside it, which cannot be created here: make the directory writable, or copy the .db and its -wal file to a writable directory",
            PathBuf::from(shm).display()
        )),
    }
}
