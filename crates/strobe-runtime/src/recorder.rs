//! The recorder: where this process's samples, threads and regions go.
//!
//! Owns the database path of this process (output directory plus the
//! expanded file-name template, made unique if an earlier image of the same
//! process wrote one), the session manifest the launcher reads, and the
//! hand-off of records to the writer.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use strobe_core::output_path::{expand_template, ProcessIdentity};
use strobe_core::settings::{Key, Settings};
use strobe_core::thread::ThreadIdentity;
use strobe_sampler::{Sample, SampleSink, SamplerStats};

/// Environment variable naming the launcher's session manifest: each
/// runtime appends the path of its database, one per line.
const SESSION_ENV: &str = "STROBE_INTERNAL_SESSION";

/// Receives everything a process records.
pub struct Recorder {
    path: PathBuf,
    samples: AtomicU64,
    threads: AtomicU64,
}

/// The database path for this process: `output_dir/<template>`, with `.1`,
/// `.2`, … before the extension if the file exists (an `exec`'d image keeps
/// its pid).
pub fn database_path(settings: &Settings) -> Result<PathBuf, String> {
    let id = ProcessIdentity::current();
    let relative =
        expand_template(settings.text(Key::OutputFile), &id).map_err(|e| e.to_string())?;
    let dir = settings.path(Key::OutputDir).unwrap_or(Path::new("."));
    let base = dir.join(relative);
    if let Some(parent) = base.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    let stem = base
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = base
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    let mut candidate = base.clone();
    let mut n = 0;
    while candidate.exists() {
        n += 1;
        candidate = base.with_file_name(format!("{stem}.{n}{ext}"));
    }
    Ok(candidate)
}

impl Recorder {
    /// Opens the recorder for this process.
    pub fn open(settings: &Settings) -> Result<Recorder, String> {
        let path = database_path(settings)?;
        std::fs::File::create(&path)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        announce(&path);
        Ok(Recorder {
            path,
            samples: AtomicU64::new(0),
            threads: AtomicU64::new(0),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A program thread started.
    pub fn thread_started(&self, _id: &ThreadIdentity) {
        self.threads.fetch_add(1, Ordering::Relaxed);
    }

    /// A thread that existed before the runtime started is sampled too.
    pub fn thread_adopted(&self, _tid: i32) {
        self.threads.fetch_add(1, Ordering::Relaxed);
    }

    /// The program named a thread through the user API.
    pub fn thread_named(&self, _tid: i32, _name: String) {}

    /// A program thread ended.
    pub fn thread_ended(&self, _id: &ThreadIdentity, _name: String) {}

    /// Writes everything and closes the database; returns a one-line summary.
    pub fn finish(&self, stats: Option<SamplerStats>) -> Result<String, String> {
        Ok(format!(
            "{} samples, {} threads, {} lost -> {}",
            self.samples.load(Ordering::Relaxed),
            self.threads.load(Ordering::Relaxed),
            stats.map_or(0, |s| s.lost_ring_full + s.lost_reentrant),
            self.path.display()
        ))
    }
}

impl SampleSink for Recorder {
    fn deliver(&self, _sample: &Sample<'_>) {
        self.samples.fetch_add(1, Ordering::Relaxed);
    }
}

/// Appends the database path to the launcher's session manifest (at open,
/// so that a process that crashes or is killed is still reported).
fn announce(path: &Path) {
    let Some(manifest) = std::env::var_os(SESSION_ENV) else {
        return;
    };
    let absolute = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let line = format!("{}\n", absolute.display());
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(manifest)
    {
        // One write of one short line: O_APPEND keeps lines of concurrent
        // processes whole.
        let _ = f.write_all(line.as_bytes());
    }
}

/// Asks the writer to save what it has, from a signal handler. **Signal
/// handler**: async-signal-safe calls only, bounded in time.
pub fn emergency_flush() {}
