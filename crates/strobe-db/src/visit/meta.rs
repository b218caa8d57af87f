//! The small tables a visit hands over first: processes and modules.
//!
//! Owns [`ProcessRow`] and [`ModuleRow`] and the queries that load them
//! whole (one row per process or loaded module: small). It never streams
//! events and never formats output.

use std::sync::Arc;

use crate::reader::Profile;
use crate::Result;

/// A process of the profile.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ProcessRow {
    /// Process guid (names the process across files).
    pub guid: String,
    /// OS pid.
    pub pid: i64,
    /// OS parent pid.
    pub ppid: i64,
    /// Command line, arguments joined by spaces.
    pub command: String,
    /// Machine id of the node.
    pub machine_id: String,
    /// Host name of the node.
    pub hostname: String,
    /// Process start (ns, `CLOCK_MONOTONIC` of its node).
    pub start: Option<i64>,
    /// `CLOCK_REALTIME − CLOCK_MONOTONIC` of its node in ns, from the clock
    /// snapshot the writer recorded (`strobe_settings` `clock.*`), if any.
    pub realtime_minus_monotonic: Option<i64>,
    /// Process end (ns), NULL for a killed writer.
    pub end: Option<i64>,
    /// The MPI job and world rank (`strobe_settings` `mpi.job`,
    /// `mpi.rank`), for a rank of an MPI job.
    pub mpi: Option<(String, i64)>,
    /// Its clock comparisons with rank 0 (`strobe_clock_sync`): local
    /// time, offset, round trip (ns).
    pub clock_sync: Vec<(i64, i64, i64)>,
}

impl ProcessRow {
    /// A short display name: the executable's file name.
    pub fn short_name(&self) -> String {
        let exe = self.command.split_whitespace().next().unwrap_or("");
        let base = exe.rsplit('/').next().unwrap_or(exe);
        if base.is_empty() {
            format!("pid {}", self.pid)
        } else {
            base.to_string()
        }
    }
}

/// A loaded module (executable or shared library) of a process.
#[derive(Debug, Clone, PartialEq)]
pub struct ModuleRow {
    /// Process guid.
    pub guid: String,
    /// Path.
    pub path: Arc<str>,
    /// GNU build id (hex), if known.
    pub build_id: Option<String>,
    /// Load address.
    pub load_address: u64,
    /// Mapped size.
    pub size: u64,
}

/// Loads every process (a small table).
pub(super) fn processes(p: &Profile) -> Result<Vec<ProcessRow>> {
    let rows = p.stream_query(
        "SELECT guid, pid, ppid, command, machine_id, hostname, start, \"end\", \
           (SELECT CAST(r.value AS INTEGER) - CAST(m.value AS INTEGER) FROM strobe_settings r, strobe_settings m \
             WHERE r.guid = processes.guid AND m.guid = processes.guid \
               AND r.name = 'clock.realtime_ns' AND m.name = 'clock.monotonic_ns'), \
           (SELECT value FROM strobe_settings WHERE guid = processes.guid AND name = 'mpi.job'), \
           (SELECT CAST(value AS INTEGER) FROM strobe_settings WHERE guid = processes.guid AND name = 'mpi.rank'), \
           (SELECT group_concat(local_ns || ' ' || offset_ns || ' ' || rtt_ns, ',') FROM strobe_clock_sync \
             WHERE guid = processes.guid) \
         FROM processes ORDER BY start, guid",
        |r| {
            Ok(ProcessRow {
                guid: r.get(0)?,
                pid: r.get::<_, Option<i64>>(1)?.unwrap_or(0),
                ppid: r.get::<_, Option<i64>>(2)?.unwrap_or(0),
                command: r.get::<_, Option<String>>(3)?.unwrap_or_default(),
                machine_id: r.get::<_, Option<String>>(4)?.unwrap_or_default(),
                hostname: r.get::<_, Option<String>>(5)?.unwrap_or_default(),
                start: r.get(6)?,
                end: r.get(7)?,
                realtime_minus_monotonic: r.get(8)?,
                mpi: match (r.get::<_, Option<String>>(9)?, r.get::<_, Option<i64>>(10)?) {
                    (Some(job), Some(rank)) => Some((job, rank)),
                    _ => None,
                },
                clock_sync: parse_clock_sync(r.get::<_, Option<String>>(11)?.as_deref()),
            })
        },
    )?;
    rows.collect::<std::result::Result<_, _>>()
}

/// Loads every module of every process (a small table).
pub(super) fn modules(p: &Profile) -> Result<Vec<ModuleRow>> {
    let rows = p.stream_query(
        "SELECT guid, path, build_id, load_address, size FROM strobe_module ORDER BY guid, id",
        |r| {
            Ok(ModuleRow {
                guid: r.get(0)?,
                path: Arc::from(r.get::<_, Option<String>>(1)?.unwrap_or_default().as_str()),
                build_id: r.get(2)?,
                load_address: r.get::<_, Option<i64>>(3)?.unwrap_or(0) as u64,
                size: r.get::<_, Option<i64>>(4)?.unwrap_or(0) as u64,
            })
        },
    )?;
    rows.collect::<std::result::Result<_, _>>()
}
/// `local offset rtt` triples joined by commas.
fn parse_clock_sync(text: Option<&str>) -> Vec<(i64, i64, i64)> {
    text.unwrap_or_default()
        .split(',')
        .filter_map(|t| {
            let mut n = t.split(' ').map(|v| v.parse::<i64>().ok());
            Some((n.next()??, n.next()??, n.next()??))
        })
        .collect()
}
