//! The processes of a dataset, with what their rows carry besides their
//! tables.
//!
//! Owns [`Proc`] (a process's guid, where its tables are read, its row of
//! the run, the hive partition of its node, its MPI rank, world size, job
//! and launcher) and [`ProcessClock`], the one place a process's
//! timestamps are aligned to the profile's time base, all taken from
//! strobe-db ([`Profile::run`], [`Profile::mpi_settings`],
//! [`Profile::process_sources`]). It never reads a process's tables and
//! never writes.

use std::collections::HashMap;

use parquet::data_type::ByteArray;
use strobe_db::process_tables::ProcessSource;
use strobe_db::visit::{ProcessRow, Shift};
use strobe_db::Profile;

use super::columns::text;
use crate::error::Result;

/// A process's clock on the profile's common time base: the one place a
/// node's monotonic timestamp becomes an aligned one, through the
/// process's [`Shift`] from [`strobe_db::visit::clock_shifts`] (its node's
/// offset, and for an MPI rank the offset to rank 0's clock it measured,
/// interpolated over the run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessClock {
    shift: Shift,
}

impl ProcessClock {
    /// `t` (ns, the process's node's `CLOCK_MONOTONIC`) on the common
    /// time base.
    pub fn align(&self, t: i64) -> i64 {
        t + self.shift
    }
}

/// Every process of the profile as the dataset needs it.
pub(super) struct Proc {
    pub(super) guid: String,
    pub(super) guid_value: ByteArray,
    /// Where its tables are read.
    pub(super) source: ProcessSource,
    pub(super) row: ProcessRow,
    /// The hive partition directory of its node, `node=…`.
    pub(super) node_dir: String,
    pub(super) rank: i64,
    pub(super) world_size: Option<i64>,
    pub(super) job: Option<String>,
    pub(super) launcher: Option<String>,
    pub(super) clock: ProcessClock,
}

/// A hostname as a hive partition value: bytes other than letters,
/// digits, `.`, `_` and `-` percent-encoded (readers decode them);
/// `unknown` when empty.
pub(super) fn partition_value(s: &str) -> String {
    if s.is_empty() {
        return "unknown".to_string();
    }
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The processes of `p`, one per table set.
pub(super) fn processes(p: &Profile) -> Result<Vec<Proc>> {
    let run = p.run()?;
    let (rows, shifts) = (&run.processes, &run.shifts);
    let by_guid: HashMap<&str, &ProcessRow> = rows.iter().map(|r| (r.guid.as_str(), r)).collect();
    let settings = p.mpi_settings()?;
    let mut out = Vec::new();
    // Each process is read from its file on a connection of its own.
    for source in p.process_sources() {
        let guid = source.guid.clone();
        let row = by_guid.get(guid.as_str()).map_or_else(
            || ProcessRow {
                guid: guid.clone(),
                ..Default::default()
            },
            |r| (*r).clone(),
        );
        let mpi = settings.get(&guid);
        let setting = |name: &str| mpi.and_then(|m| m.get(name)).map(|v| v.trim().to_string());
        let int = |name: &str| setting(name).and_then(|v| v.parse::<i64>().ok());
        let rank = int("mpi.rank").filter(|r| *r >= 0).unwrap_or(-1);
        out.push(Proc {
            guid_value: text(&guid),
            node_dir: format!("node={}", partition_value(&row.hostname)),
            rank,
            world_size: int("mpi.world_size"),
            job: setting("mpi.job"),
            launcher: setting("mpi.launcher"),
            clock: ProcessClock {
                shift: shifts.get(&guid).copied().unwrap_or_default(),
            },
            source,
            row,
            guid,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostnames_become_safe_partition_values() {
        assert_eq!(partition_value("node-01.cluster"), "node-01.cluster");
        assert_eq!(partition_value("a b/c=d"), "a%20b%2Fc%3Dd");
        assert_eq!(partition_value(""), "unknown");
    }

    #[test]
    fn the_clock_shifts_timestamps() {
        let c = ProcessClock {
            shift: Shift::constant(-5),
        };
        assert_eq!(c.align(100), 95);
        let c = ProcessClock {
            shift: Shift::constant(1),
        };
        assert_eq!(c.align(i64::MAX), i64::MAX);
    }
}
