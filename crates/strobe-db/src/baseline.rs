//! The raw-SQLite yardstick the writer is measured against.
//!
//! Owns [`write_raw`]: the rows of a synthetic profile (samples of a fixed
//! set of one-frame stacks and regions) inserted with plain prepared
//! statements into the same tables, with the same pragmas and the same
//! rows per transaction as the writer's, and the setup rows the writer
//! stores (node, process, threads, tracks, strings, module, setting,
//! frames, call sites, shared events) — an ideal writer that never
//! interns. `strobe-bench db` times it beside [`crate::Writer`]. It never
//! reads a profile, never times and never prints.

use std::path::Path;

use rusqlite::params;

use crate::error::{Result, SqlContext};

/// What the synthetic profile holds besides its records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawSetup {
    /// OS pid of the process.
    pub pid: u32,
    /// Threads (and sample tracks), row ids 1 to `threads`.
    pub threads: u32,
    /// Distinct stacks: one frame, call site and event each, row ids 1 to
    /// `stacks`.
    pub stacks: usize,
    /// Region names `region_0` to `region_{names - 1}`, string ids 1 to
    /// `names`.
    pub names: usize,
    /// Records per transaction.
    pub batch: usize,
}

/// One record of the synthetic profile (indices from 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawRecord {
    /// A CPU sample of `thread` at `ts` with stack `stack` (1 ms weight).
    Sample {
        /// Thread index.
        thread: usize,
        /// Timestamp (ns).
        ts: u64,
        /// Stack index.
        stack: usize,
    },
    /// A region of `thread` named `region_<name>`.
    Region {
        /// Thread index.
        thread: usize,
        /// Start (ns).
        start: u64,
        /// End (ns).
        end: u64,
        /// Name index.
        name: usize,
    },
}

/// The suffix (and guid) of the one process of a raw file.
const SUFFIX: &str = "_00000000_0000_7000_8000_000000000000";
const GUID: &str = "00000000-0000-7000-8000-000000000000";

/// Creates the database `path` (which must not exist) and inserts the
/// setup rows, then `records`, with raw prepared statements, committing
/// every `setup.batch` records; the write-ahead log is checkpointed at the
/// end, as the writer does.
pub fn write_raw(
    path: &Path,
    setup: &RawSetup,
    records: impl Iterator<Item = RawRecord>,
) -> Result<()> {
    let conn = rusqlite::Connection::open(path).at(path)?;
    conn.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA cache_size=-8192;",
    )
    .at(path)?;
    crate::schema::create_tables(&conn, SUFFIX, GUID).at(path)?;
    insert_setup(&conn, setup).at(path)?;
    insert_records(&conn, setup, records).at(path)?;
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .at(path)?;
    Ok(())
}

/// The same setup rows the writer stores (node, process, threads, tracks,
/// strings, module, settings, frames, call sites), so both files populate
/// the same tables.
fn insert_setup(conn: &rusqlite::Connection, setup: &RawSetup) -> rusqlite::Result<()> {
    let (s, pid) = (SUFFIX, setup.pid);
    conn.execute_batch(&format!(
        "BEGIN;
         INSERT INTO \"rocpd_info_node{s}\" (hash, machine_id) VALUES (1, 'strobe-bench');
         INSERT INTO \"rocpd_info_process{s}\" (nid, ppid, pid) VALUES (1, 1, {pid});
         INSERT INTO \"strobe_settings{s}\" (name, value) VALUES ('strobe_version', '0');
         INSERT INTO \"strobe_module{s}\" (pid, path, load_address, size) VALUES (1, '/usr/lib/libsynthetic.so', 0, 1048576);
         COMMIT;"
    ))?;
    let mut st = conn.prepare(&format!(
        "INSERT INTO \"rocpd_string{s}\" (string) VALUES (?1)"
    ))?;
    for k in 0..setup.names {
        st.execute([format!("region_{k}")])?;
    }
    st.execute(["user"])?;
    st.execute(["sample"])?;
    let mut th = conn.prepare(&format!(
        "INSERT INTO \"rocpd_info_thread{s}\" (nid, pid, tid) VALUES (1, 1, ?1)"
    ))?;
    let mut tr = conn.prepare(&format!(
        "INSERT INTO \"rocpd_track{s}\" (nid, pid, tid, name_id) VALUES (1, 1, ?1, 1)"
    ))?;
    for k in 0..setup.threads {
        th.execute([k + 1])?;
        tr.execute([k + 1])?;
    }
    let mut fr = conn.prepare(&format!(
        "INSERT INTO \"strobe_frame{s}\" (module_id, rel_pc) VALUES (1, ?1)"
    ))?;
    let mut cs = conn.prepare(&format!(
        "INSERT INTO \"strobe_callsite{s}\" (parent_id, frame_id, depth) VALUES (?1, ?2, ?3)"
    ))?;
    let stacks = setup.stacks as i64;
    for k in 0..stacks {
        fr.execute([k])?;
        cs.execute(params![Option::<i64>::None, k + 1, 0])?;
    }
    // The events the writer shares: one per sampled stack (ids 1 to
    // `stacks`), one for every region (`stacks + 1`).
    let mut ev = conn.prepare(&format!(
        "INSERT INTO \"rocpd_event{s}\" (category_id, stack_id) VALUES (?1, ?2)"
    ))?;
    let names = setup.names as i64;
    for k in 0..stacks {
        ev.execute(params![names + 2, k + 1])?;
    }
    ev.execute(params![names + 1, Option::<i64>::None])?;
    Ok(())
}

/// The records, `setup.batch` per transaction.
fn insert_records(
    conn: &rusqlite::Connection,
    setup: &RawSetup,
    records: impl Iterator<Item = RawRecord>,
) -> rusqlite::Result<()> {
    let s = SUFFIX;
    let mut sa = conn.prepare(&format!(
        "INSERT INTO \"rocpd_sample{s}\" (track_id, timestamp, event_id, extdata) VALUES (?1, ?2, ?3, json_object('weight_ns', 1000000))"
    ))?;
    let mut re = conn.prepare(&format!("INSERT INTO \"rocpd_region{s}\" (nid, pid, tid, start, \"end\", name_id, event_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"))?;
    let mut begin = conn.prepare("BEGIN")?;
    let mut commit = conn.prepare("COMMIT")?;
    let region_event = setup.stacks as i64 + 1;
    begin.execute([])?;
    let mut rows = 0usize;
    for rec in records {
        match rec {
            RawRecord::Sample { thread, ts, stack } => {
                sa.execute(params![thread as i64 + 1, ts as i64, stack as i64 + 1])?;
            }
            RawRecord::Region {
                thread,
                start,
                end,
                name,
            } => {
                re.execute(params![
                    1i64,
                    1i64,
                    thread as i64 + 1,
                    start as i64,
                    end as i64,
                    name as i64 + 1,
                    region_event
                ])?;
            }
        }
        rows += 1;
        if rows >= setup.batch {
            commit.execute([])?;
            begin.execute([])?;
            rows = 0;
        }
    }
    commit.execute([])?;
    Ok(())
}
