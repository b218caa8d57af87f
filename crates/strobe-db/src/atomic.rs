//! Outputs that appear whole or not at all.
//!
//! Owns the one way strobe writes an output file or directory: under
//! `<path>.partial` ([`partial_path`]), renamed to `path` when complete
//! ([`Partial::commit`]), removed when anything fails first (a
//! [`Partial`] dropped uncommitted), so that a failed or interrupted
//! write never leaves a truncated file or a half dataset under the final
//! name. [`write_file`] does it for a file written through a buffered
//! writer (the exports, `strobe convert` and the Python package); the
//! merge writes a database at [`Partial::path`], and the Parquet exporter
//! a directory ([`Partial::dir`]). It never writes anything but the
//! partial name, the final name and, while replacing a directory,
//! `<path>.old`.

use std::ffi::OsString;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use crate::{DbError, Result};

/// `path` with `suffix` appended to its file name.
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = OsString::from(path.as_os_str());
    s.push(suffix);
    PathBuf::from(s)
}

/// The name an output is written under until it is complete:
/// `<path>.partial`.
pub fn partial_path(path: &Path) -> PathBuf {
    with_suffix(path, ".partial")
}

fn io_at(path: &Path) -> impl Fn(std::io::Error) -> DbError + '_ {
    move |error| DbError::Io {
        path: path.to_path_buf(),
        error,
    }
}

/// An output being written under its partial name: renamed into place by
/// [`Partial::commit`], removed when dropped before.
#[derive(Debug)]
pub struct Partial {
    /// The final name.
    target: PathBuf,
    partial: PathBuf,
    dir: bool,
    committed: bool,
}

impl Partial {
    /// A file to be written at `path` (a partial file left by an earlier
    /// attempt is removed).
    pub fn file(path: &Path) -> Partial {
        let partial = partial_path(path);
        let _ = std::fs::remove_file(&partial);
        Partial {
            target: path.to_path_buf(),
            partial,
            dir: false,
            committed: false,
        }
    }

    /// A directory to be written at `path`: its partial directory created
    /// empty (one left by an earlier attempt is removed first).
    pub fn dir(path: &Path) -> Result<Partial> {
        let p = Partial {
            target: path.to_path_buf(),
            partial: partial_path(path),
            dir: true,
            committed: false,
        };
        if p.partial.exists() {
            std::fs::remove_dir_all(&p.partial).map_err(io_at(&p.partial))?;
        }
        std::fs::create_dir_all(&p.partial).map_err(io_at(&p.partial))?;
        Ok(p)
    }

    /// Where the output is written until it is complete.
    pub fn path(&self) -> &Path {
        &self.partial
    }

    /// Renames the complete output to its final name. A directory
    /// replaces one already there: the old one moves aside to
    /// `<path>.old`, comes back when the rename fails, and is removed
    /// after. An error names the path concerned.
    pub fn commit(mut self) -> Result<()> {
        let (path, partial) = (&self.target, &self.partial);
        if !self.dir {
            std::fs::rename(partial, path).map_err(io_at(path))?;
            self.committed = true;
            return Ok(());
        }
        let old = with_suffix(path, ".old");
        if path.exists() {
            if old.exists() {
                std::fs::remove_dir_all(&old).map_err(io_at(&old))?;
            }
            std::fs::rename(path, &old).map_err(io_at(path))?;
        }
        if let Err(e) = std::fs::rename(partial, path) {
            if old.exists() {
                let _ = std::fs::rename(&old, path);
            }
            return Err(io_at(path)(e));
        }
        self.committed = true;
        if old.exists() {
            std::fs::remove_dir_all(&old).map_err(io_at(&old))?;
        }
        Ok(())
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        let _ = if self.dir {
            std::fs::remove_dir_all(&self.partial)
        } else {
            std::fs::remove_file(&self.partial)
        };
    }
}

/// What failed in [`write_file`].
#[derive(Debug)]
pub enum WriteError<E> {
    /// The partial file could not be created.
    Create {
        /// The partial file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// Writing the contents failed (the writer's own error).
    Write(E),
    /// The complete file could not be renamed to its final name.
    Rename {
        /// The partial file.
        from: PathBuf,
        /// The final name.
        to: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
}

impl<E: std::fmt::Display> std::fmt::Display for WriteError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteError::Create { path, .. } => write!(
                f,
                "cannot create {} (check the directory is writable)",
                path.display()
            ),
            WriteError::Write(e) => e.fmt(f),
            WriteError::Rename { from, to, .. } => {
                write!(f, "cannot rename {} to {}", from.display(), to.display())
            }
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for WriteError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WriteError::Create { error, .. } | WriteError::Rename { error, .. } => Some(error),
            WriteError::Write(e) => e.source(),
        }
    }
}

/// Writes the file `path` through `<path>.partial`: `f` writes the
/// contents through a buffered writer (1 MiB), the file is renamed to
/// `path` when `f` succeeds and removed when it fails.
pub fn write_file<T, E>(
    path: &Path,
    f: impl FnOnce(BufWriter<File>) -> std::result::Result<T, E>,
) -> std::result::Result<T, WriteError<E>> {
    let partial = Partial::file(path);
    let file = File::create(partial.path()).map_err(|error| WriteError::Create {
        path: partial.path().to_path_buf(),
        error,
    })?;
    let v = f(BufWriter::with_capacity(1 << 20, file)).map_err(WriteError::Write)?;
    let from = partial.path().to_path_buf();
    partial.commit().map_err(|e| match e {
        DbError::Io { error, .. } => WriteError::Rename {
            from,
            to: path.to_path_buf(),
            error,
        },
        other => WriteError::Rename {
            from,
            to: path.to_path_buf(),
            error: std::io::Error::other(other.to_string()),
        },
    })?;
    Ok(v)
}
