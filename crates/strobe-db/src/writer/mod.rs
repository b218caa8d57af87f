//! The streaming writer: one profile database per process.
//!
//! Owns creating a database file (tables, views, metadata, process and node
//! rows) and appending records to it in batched transactions: typed append
//! calls for threads, tracks, strings, events, args, regions, samples with
//! call stacks, modules, counters and counter samples, causal-profiling
//! experiments and their in-scope samples, plus the symbolization update of
//! frames. Memory is bounded by the interning caches (distinct
//! values only) and SQLite's page cache, never by run length. It never starts
//! a thread and never creates an index; the owner calls [`Writer::maybe_flush`]
//! (or appends) often enough for the periodic flush to happen.
//!
//! File lifecycle: the file is created exclusively (an existing file is never
//! reused, so two writers can never share one) with mode 0644 whatever the
//! umask, written in WAL mode, and left by [`Writer::finish`] in
//! rollback-journal mode with the WAL checkpointed and removed, so a finished
//! profile is one plain file with nothing beside it.
//!
//! This file owns the [`Writer`] itself: creating and filling the new file,
//! the transaction batching every append goes through, and finishing. The
//! appends live beside it, grouped by what they write (`events`: strings,
//! threads, tracks, events, regions; `samples`: modules, frames, stacks,
//! samples; `counters`: agents, counters, metrics, memory operations;
//! `run_facts`: settings, clock comparisons, causal experiments), with the
//! row ids and record types callers pass (`records`), the prepared
//! statements (`stmts`) and the interning caches (`intern`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::{params, Connection, OpenFlags, OptionalExtension};

use crate::error::{DbError, Result, SqlContext};
use crate::identity::{NodeInfo, ProcessUuid};
use crate::process::ProcessInfo;
use crate::schema::{self, TableSet, ViewWindow};

mod counters;
mod events;
mod intern;
pub(crate) mod records;
mod run_facts;
mod samples;
mod stmts;

pub use crate::symbols::FrameSymbols;
pub use records::{
    AgentId, AgentInfo, AgentKind, AllocOp, Arg, CallSiteId, CausalExperiment, CausalProgress,
    ClockSync, CounterId, CounterInfo, EventId, FrameId, MemLevel, MemoryOp, MetricRow, ModuleId,
    ModuleRow, ProgressKind, Region, RegionStats, SampleKind, SampleMeta, StackFrame, StringId,
    ThreadInfo, ThreadRef, TrackId, WeightScale, WriterOptions, WriterTotals,
};

use intern::InternCaches;
use stmts::{i, Stmts};

/// The streaming writer of one process database.
///
/// Create it with [`Writer::create`], append from one thread (it is `Send`,
/// not `Sync`), call [`Writer::maybe_flush`] from the owner's loop when idle,
/// and end with [`Writer::finish`]. Rows are committed every
/// [`WriterOptions::batch_rows`] rows or [`WriterOptions::flush_interval`],
/// whichever comes first; committed rows are visible to readers in other
/// processes (WAL mode) and survive the writer being killed.
pub struct Writer {
    /// Declared first: dropped before `conn`, which they borrow.
    stmts: Stmts,
    path: PathBuf,
    suffix: String,
    guid: String,
    nid: i64,
    proc_row: i64,
    ppid: u32,
    opts: WriterOptions,
    caches: InternCaches,
    in_tx: bool,
    rows_in_tx: usize,
    last_commit: Instant,
    sample_categories: [Option<i64>; SampleKind::COUNT],
    /// The CPU agent counters refer to, once added.
    cpu_agent: Option<AgentId>,
    /// The event row shared by every sample with the same call stack
    /// (samples carry no per-sample event data): call site → event id.
    /// Grows with the distinct stacks, like the call-site cache.
    sample_events: std::collections::HashMap<(usize, i64), i64>,
    /// The event row shared by every region of a category that has no
    /// args, stack or correlation id ([`Writer::append_region_shared`]):
    /// (category id (0 for none), event id); a handful of categories, so a
    /// scan beats hashing.
    region_events: Vec<(i64, i64)>,
    totals: WriterTotals,
    finished: bool,
    /// Boxed so its address never changes while `stmts` borrow it.
    conn: Box<Connection>,
}

impl Writer {
    /// Creates a new database at `path` for `process`: all rocpd and strobe
    /// tables with the process's uuid suffix, the unsuffixed and standard
    /// views, metadata, the node and process rows.
    ///
    /// The file is created exclusively (`O_CREAT|O_EXCL`): if anything
    /// exists at `path` (a file, a dangling symlink), this fails with a
    /// [`DbError::Io`] of kind [`std::io::ErrorKind::AlreadyExists`] and
    /// touches nothing, so a profile is never overwritten and two writers
    /// never share a file. Use [`Writer::create_unique`] to pick a free name
    /// instead. The new file gets mode 0644 whatever the process umask. If
    /// creation fails after the file was made, the file is removed again.
    pub fn create(
        path: impl AsRef<Path>,
        process: &ProcessInfo,
        opts: WriterOptions,
    ) -> Result<Writer> {
        let path = path.as_ref().to_path_buf();
        create_exclusive(&path)?;
        Writer::initialize(path.clone(), process, opts).inspect_err(|_| {
            // The file is ours (created exclusively above) and unusable:
            // remove it and whatever SQLite left beside it.
            for suffix in ["", "-wal", "-shm", "-journal"] {
                let mut p = path.clone().into_os_string();
                p.push(suffix);
                let _ = std::fs::remove_file(p);
            }
        })
    }

    /// Creates a new database at `path`, or, when something already exists
    /// there, at the first free name among `<stem>.1.<ext>`,
    /// `<stem>.2.<ext>`, … (`out/1234.db`, `out/1234.1.db`, `out/1234.2.db`,
    /// …). Each candidate is created exclusively, so concurrent callers (two
    /// processes with the same pid on different hosts sharing a directory, a
    /// pid reused within one run) always get different files. The chosen
    /// path is [`Writer::path`]. Otherwise exactly like [`Writer::create`].
    /// Gives up after 10 000 names.
    pub fn create_unique(
        path: impl AsRef<Path>,
        process: &ProcessInfo,
        opts: WriterOptions,
    ) -> Result<Writer> {
        let base = path.as_ref();
        let stem = base
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let ext = base
            .extension()
            .map(|e| format!(".{}", e.to_string_lossy()))
            .unwrap_or_default();
        const TRIES: u32 = 10_000;
        for n in 0..TRIES {
            let candidate = if n == 0 {
                base.to_path_buf()
            } else {
                base.with_file_name(format!("{stem}.{n}{ext}"))
            };
            match Writer::create(&candidate, process, opts.clone()) {
                Err(DbError::Io { error, .. })
                    if error.kind() == std::io::ErrorKind::AlreadyExists => {}
                other => return other,
            }
        }
        Err(DbError::Io {
            path: base.to_path_buf(),
            error: std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!("{TRIES} files named like this already exist; choose another output directory or clean this one"),
            ),
        })
    }

    /// Fills the freshly created, empty file at `path`.
    fn initialize(path: PathBuf, process: &ProcessInfo, opts: WriterOptions) -> Result<Writer> {
        let node = opts.node.clone().unwrap_or_else(NodeInfo::detect);
        let uuid = ProcessUuid::new(
            &node.machine_id,
            process.pid,
            process.ppid,
            process.start_unix_ns,
        );
        let suffix = uuid.suffix();
        let guid = uuid.guid();
        // No SQLITE_OPEN_CREATE: the file was just made by create_exclusive.
        let conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .at(&path)?;
        conn.execute_batch(&format!(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA cache_size=-{};",
            opts.cache_kib
        ))
        .at(&path)?;
        conn.set_prepared_statement_cache_capacity(64);
        conn.execute_batch("BEGIN").at(&path)?;
        schema::create_tables(&conn, &suffix, &guid).at(&path)?;
        schema::create_views(
            &conn,
            &[TableSet {
                schema: "main".into(),
                suffix: suffix.clone(),
            }],
            false,
            &ViewWindow::default(),
        )
        .at(&path)?;
        let s = &suffix;
        // AUTOINCREMENT looks its table up in sqlite_sequence by scanning
        // from the first row on every insert: seed the rows so the hottest
        // tables come first.
        let hot = [
            "rocpd_event",
            "rocpd_sample",
            "rocpd_region",
            "rocpd_arg",
            "strobe_counter_sample",
            "strobe_callsite",
            "strobe_frame",
            "rocpd_string",
        ];
        for t in hot
            .iter()
            .copied()
            .chain(schema::all_tables().filter(|t| !hot.contains(t) && *t != "rocpd_metadata"))
        {
            conn.execute(
                "INSERT INTO sqlite_sequence (name, seq) VALUES (?1, 0)",
                [format!("{t}{s}")],
            )
            .at(&path)?;
        }
        conn.execute(
            &format!("INSERT INTO \"rocpd_info_node{s}\" (hash, machine_id, system_name, hostname, release, version, hardware_name, domain_name) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"),
            params![node.hash(), node.machine_id, node.system_name, node.hostname, node.release, node.version, node.hardware_name, node.domain_name],
        )
        .at(&path)?;
        let nid = conn.last_insert_rowid();
        let env: serde_json::Map<String, serde_json::Value> = process
            .environment
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect();
        conn.execute(
            &format!("INSERT INTO \"rocpd_info_process{s}\" (nid, ppid, pid, init, start, command, environment) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"),
            params![nid, process.ppid, process.pid, i(process.init_ns), i(process.start_ns), process.command, serde_json::Value::Object(env).to_string()],
        )
        .at(&path)?;
        let proc_row = conn.last_insert_rowid();
        {
            let mut st = conn
                .prepare(&format!(
                    "INSERT INTO \"strobe_settings{s}\" (name, value) VALUES (?1, ?2)"
                ))
                .at(&path)?;
            st.execute(params!["strobe_version", env!("CARGO_PKG_VERSION")])
                .at(&path)?;
            // The clocks read together, so that converters can align this
            // process's monotonic timestamps with other processes and nodes.
            let clocks = strobe_core::clock::ClockSnapshot::take();
            for (name, ns) in [
                ("clock.monotonic_ns", clocks.monotonic_ns),
                ("clock.realtime_ns", clocks.realtime_ns),
                ("clock.boottime_ns", clocks.boottime_ns),
            ] {
                st.execute(params![name, ns.to_string()]).at(&path)?;
            }
            for (k, v) in &opts.settings {
                st.execute(params![k, v]).at(&path)?;
            }
        }
        conn.execute_batch("COMMIT").at(&path)?;
        let conn = Box::new(conn);
        // SAFETY: `conn` is boxed and moved into the Writer together with
        // the statements; `stmts` is declared before `conn`, so it is
        // dropped first.
        let stmts = unsafe { Stmts::new(&conn, &suffix, nid, proc_row) }.at(&path)?;
        Ok(Writer {
            stmts,
            conn,
            path,
            suffix,
            guid,
            nid,
            proc_row,
            ppid: process.ppid,
            opts,
            caches: InternCaches::default(),
            in_tx: false,
            rows_in_tx: 0,
            last_commit: Instant::now(),
            sample_categories: [None; SampleKind::COUNT],
            cpu_agent: None,
            sample_events: std::collections::HashMap::new(),
            region_events: Vec::new(),
            totals: WriterTotals::default(),
            finished: false,
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The table suffix of this process (`_` + uuid with `_`).
    pub fn suffix(&self) -> &str {
        &self.suffix
    }

    /// The dashed uuid stored in every row's `guid`.
    pub fn guid(&self) -> &str {
        &self.guid
    }

    /// Number of interned (strings, frames, call sites, whole stacks) held
    /// in memory. The first three grow with distinct values only; the last
    /// is capped at 16 384.
    pub fn cache_sizes(&self) -> (usize, usize, usize, usize) {
        self.caches.sizes()
    }

    /// Rows appended and not yet committed.
    pub fn pending_rows(&self) -> usize {
        self.rows_in_tx
    }

    /// Totals so far.
    pub fn totals(&self) -> &WriterTotals {
        &self.totals
    }

    #[inline]
    fn begin_row(&mut self) -> Result<()> {
        if !self.in_tx {
            self.stmts.begin.execute([]).at(&self.path)?;
            self.in_tx = true;
        }
        Ok(())
    }

    #[inline]
    fn end_row(&mut self, rows: usize) -> Result<()> {
        self.rows_in_tx += rows;
        self.totals.rows += rows as u64;
        if self.rows_in_tx >= self.opts.batch_rows
            || (self.rows_in_tx % 1024 < rows
                && self.last_commit.elapsed() >= self.opts.flush_interval)
        {
            self.flush()?;
        }
        Ok(())
    }

    /// Commits every appended row now. After it returns, other processes
    /// see the rows and a crash cannot lose them.
    pub fn flush(&mut self) -> Result<()> {
        if self.in_tx {
            self.flush_bulk()?;
            self.stmts.commit.execute([]).at(&self.path)?;
            self.in_tx = false;
            self.totals.commits += 1;
        }
        self.rows_in_tx = 0;
        self.last_commit = Instant::now();
        Ok(())
    }

    /// Inserts the rows the multi-row inserts still hold (before a commit,
    /// or before a statement that reads or changes their tables).
    fn flush_bulk(&mut self) -> Result<()> {
        self.stmts.regions.flush().at(&self.path)?;
        self.stmts.samples.flush().at(&self.path)
    }

    /// Commits if the flush interval has passed since the last commit. Call
    /// it from the owner's loop when no records arrive, so the last rows are
    /// never held longer than the interval. Cheap when there is nothing to do.
    pub fn maybe_flush(&mut self) -> Result<bool> {
        if self.in_tx && self.last_commit.elapsed() >= self.opts.flush_interval {
            self.flush()?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Ends the run: commits, records the process end time (`end`, `fini`),
    /// closes threads that have no end time at `end_ns`, writes the totals
    /// into `strobe_settings`, checkpoints the WAL into the main file and
    /// switches the file to rollback-journal mode (`journal_mode=DELETE`),
    /// which removes the `-wal` file; the `-shm` file goes when the
    /// connection closes, at the end of this call. The result is one plain
    /// file that readers open read-only without creating anything beside it.
    ///
    /// The switch needs the file to itself: if another process has it open
    /// (a `strobe query` during the run), it retries for up to 1 s, then
    /// leaves the file in WAL mode, complete and readable, with its `-wal`
    /// and `-shm` files beside it until a read-write connection (such as
    /// post-run symbolization) closes it (see `docs/profile-db.md`); that is
    /// not an error.
    pub fn finish(mut self, end_ns: u64) -> Result<WriterTotals> {
        self.flush()?;
        let s = self.suffix.clone();
        let t = self.totals.clone();
        let sql = format!(
            "BEGIN;
             UPDATE \"rocpd_info_process{s}\" SET \"end\" = {e}, fini = {e} WHERE id = {p};
             UPDATE \"rocpd_info_thread{s}\" SET \"end\" = {e} WHERE \"end\" IS NULL;
             INSERT INTO \"strobe_settings{s}\" (name, value) VALUES
               ('total_rows', '{}'), ('total_regions', '{}'), ('total_samples', '{}'), ('total_counter_samples', '{}');
             COMMIT;",
            t.rows,
            t.regions,
            t.samples,
            t.counter_samples,
            e = i(end_ns),
            p = self.proc_row,
        );
        self.conn.execute_batch(&sql).at(&self.path)?;
        self.conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .optional()
            .at(&self.path)?;
        self.finished = true;
        // Best effort (see above). Leaving WAL needs an exclusive lock, which
        // SQLite tries once (no busy handler): retry while a reader holds the
        // file. Every row is in the main file whatever the outcome.
        let deadline = Instant::now() + FINISH_WAIT;
        while self.leave_wal() == Some(false) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(t)
    }

    /// Switches the file to rollback-journal mode: `Some(true)` when done,
    /// `Some(false)` when another connection holds the file (worth a retry),
    /// `None` on any other failure.
    fn leave_wal(&self) -> Option<bool> {
        match self
            .conn
            .query_row("PRAGMA journal_mode=DELETE", [], |r| r.get::<_, String>(0))
        {
            Ok(mode) => Some(mode.eq_ignore_ascii_case("delete")),
            Err(rusqlite::Error::SqliteFailure(e, _))
                if matches!(
                    e.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                ) =>
            {
                Some(false)
            }
            Err(_) => None,
        }
    }
}

/// How long [`Writer::finish`] retries leaving WAL mode while another
/// connection holds the file.
const FINISH_WAIT: Duration = Duration::from_secs(1);

/// Creates `path` as a new, empty file with mode 0644 (whatever the umask),
/// failing if anything exists there.
pub(crate) fn create_exclusive(path: &Path) -> Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(path)
        .map_err(|error| DbError::Io {
            path: path.to_path_buf(),
            error: if error.kind() == std::io::ErrorKind::AlreadyExists {
                std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "a file already exists there; profiles are never overwritten (remove it or choose another output path)",
                )
            } else {
                error
            },
        })?;
    // open(2) applies the umask to the mode; fchmod(2) does not.
    file.set_permissions(std::fs::Permissions::from_mode(0o644))
        .map_err(|error| DbError::Io {
            path: path.to_path_buf(),
            error,
        })
}

// SAFETY: a Writer exclusively owns its connection and every statement
// borrowing it; none of them is reachable from outside (the statements are
// private and never handed out), so moving the whole bundle to another thread
// moves all users of the connection together. Bundled SQLite is built
// thread-safe (SQLITE_THREADSAFE=1), which allows a connection and its
// statements to be used from any thread as long as not concurrently, and
// Writer is not Sync, so no two threads can use it at once.
unsafe impl Send for Writer {}

impl Drop for Writer {
    fn drop(&mut self) {
        if !self.finished {
            // Best effort: keep what was collected when the owner forgot
            // finish() or unwinds, and leave a plain file as finish() does;
            // errors cannot be reported from drop.
            let _ = self.flush();
            let _ = self.leave_wal();
        }
    }
}

#[cfg(test)]
mod tests {
    fn assert_send<T: Send>() {}

    #[test]
    fn writer_is_send() {
        assert_send::<super::Writer>();
    }
}
