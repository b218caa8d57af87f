//! Small questions about a profile, answered with one query each.
//!
//! Owns the lookups the commands ask before or beside a visit: whether
//! the window holds any event, where regions of a name begin and end, a
//! setting's stored values, every process's MPI settings and clock
//! comparisons, how many samples were stored and the bytes they take. It
//! never streams events (see [`crate::visit`]) and never formats output.

use std::collections::HashMap;

use crate::error::SqlContext;
use crate::reader::Profile;
use crate::scan::qerr;
use crate::Result;

/// One clock comparison of a process with its MPI reference process: at
/// the process's `local_ns` (its node's `CLOCK_MONOTONIC`) the
/// reference's clock read `local_ns + offset_ns`, measured over a round
/// trip of `rtt_ns`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClockSyncPoint {
    /// Process guid.
    pub guid: String,
    /// `init` or `finalize`.
    pub phase: String,
    /// The process's clock at the comparison (ns).
    pub local_ns: i64,
    /// The reference's clock minus the process's (ns).
    pub offset_ns: i64,
    /// The round trip of the exchange (ns), which bounds the error.
    pub rtt_ns: i64,
}

impl Profile {
    /// Whether the profile (window applied) holds any region, sample or
    /// counter value. Each check stops at its first row.
    pub fn has_events(&self) -> Result<bool> {
        const SQL: &str = "SELECT EXISTS (SELECT 1 FROM regions) \
                           OR EXISTS (SELECT 1 FROM samples) \
                           OR EXISTS (SELECT 1 FROM strobe_counters)";
        self.conn()
            .query_row(SQL, [], |r| r.get(0))
            .map_err(qerr(SQL))
    }

    /// The first start and the last end of the regions and markers named
    /// `name`; `None` when the profile has none.
    pub fn named_region_span(&self, name: &str) -> Result<Option<(i64, i64)>> {
        const SQL: &str = "SELECT MIN(start), MAX(\"end\") FROM regions WHERE name = ?1";
        let (first, last): (Option<i64>, Option<i64>) = self
            .conn()
            .query_row(SQL, [name], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(qerr(SQL))?;
        Ok(first.zip(last))
    }

    /// The distinct values every process stored for setting `name`,
    /// sorted.
    pub fn setting_values(&self, name: &str) -> Result<Vec<String>> {
        const SQL: &str =
            "SELECT DISTINCT value FROM strobe_settings WHERE name = ?1 ORDER BY value";
        let mut st = self.conn().prepare(SQL).map_err(qerr(SQL))?;
        let rows = st
            .query_map([name], |r| r.get::<_, String>(0))
            .map_err(qerr(SQL))?;
        rows.collect::<rusqlite::Result<_>>().map_err(qerr(SQL))
    }

    /// The first process's value of setting `name`, if stored.
    pub fn setting(&self, name: &str) -> Result<Option<String>> {
        const SQL: &str = "SELECT value FROM strobe_settings WHERE name = ?1 LIMIT 1";
        match self.conn().query_row(SQL, [name], |r| r.get(0)) {
            Ok(v) => Ok(Some(v)),
            Err(rusqlite::Error::QueryReturnedNoRows) => Ok(None),
            Err(e) => Err(qerr(SQL)(e)),
        }
    }

    /// The MPI settings (`mpi.*`: rank, world size, job, launcher) of
    /// every process, by guid, then name (a NULL value reads as empty).
    pub fn mpi_settings(&self) -> Result<HashMap<String, HashMap<String, String>>> {
        const SQL: &str = "SELECT guid, name, value FROM strobe_settings WHERE name LIKE 'mpi.%'";
        let rows = self.stream_query(SQL, |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, Option<String>>(2)?.unwrap_or_default(),
            ))
        })?;
        let mut out: HashMap<String, HashMap<String, String>> = HashMap::new();
        for r in rows {
            let (guid, name, value) = r?;
            out.entry(guid).or_default().insert(name, value);
        }
        Ok(out)
    }

    /// Every clock comparison stored (`strobe_clock_sync`: made by the MPI
    /// wrappers with rank 0 at `MPI_Init` and `MPI_Finalize`), by process,
    /// then in the order made.
    pub fn clock_sync_points(&self) -> Result<Vec<ClockSyncPoint>> {
        const SQL: &str = "SELECT guid, phase, local_ns, offset_ns, rtt_ns FROM strobe_clock_sync \
                           ORDER BY guid, id";
        let rows = self.stream_query(SQL, |r| {
            Ok(ClockSyncPoint {
                guid: r.get(0)?,
                phase: r.get(1)?,
                local_ns: r.get(2)?,
                offset_ns: r.get(3)?,
                rtt_ns: r.get(4)?,
            })
        })?;
        rows.collect()
    }

    /// Bytes of the pages that hold the stored samples (the sample tables
    /// and their indexes, as SQLite's `dbstat` counts them), every input
    /// together; `None` when no page was found.
    pub fn sample_table_bytes(&self) -> Result<Option<i64>> {
        const SQL: &str = "SELECT SUM(pgsize) FROM dbstat(?1) WHERE name LIKE 'rocpd_sample%'";
        let mut seen = std::collections::HashSet::new();
        let mut total = None;
        for (k, (ts, _)) in self.table_sets().iter().enumerate() {
            // One file (an attached schema) holds every process of a merge.
            if !seen.insert(self.set_file(k).to_path_buf()) {
                continue;
            }
            let bytes: Option<i64> = self.set_connection(k, |conn| {
                conn.query_row(SQL, [&ts.schema], |r| r.get(0))
                    .map_err(qerr(SQL))
            })?;
            if let Some(b) = bytes {
                total = Some(total.unwrap_or(0) + b);
            }
        }
        Ok(total)
    }

    /// Samples stored (every kind, the window ignored).
    pub fn stored_samples(&self) -> Result<u64> {
        const SQL: &str = "SELECT COUNT(*) FROM rocpd_sample";
        let n: i64 = self
            .conn()
            .query_row(SQL, [], |r| r.get(0))
            .map_err(qerr(SQL))?;
        Ok(n.max(0) as u64)
    }

    /// The kind of sample whose weights are the profile's time on CPU:
    /// CPU-time samples (`sample`), or, in a profile that has none (only a
    /// real-time timer ran), real-time ones (`wall_sample`), which also count
    /// time spent waiting. Never both: where both timers ran, the real-time
    /// samples are left out of the time columns (they would count CPU time
    /// twice).
    pub fn time_kind(&self) -> Result<crate::SampleKind> {
        let path = self.files().first().cloned().unwrap_or_default();
        // The category string is interned with a kind's first sample: where it
        // is missing (the common case for real-time samples) no scan is needed.
        // Two queries: SQLite evaluates both sides of an `AND` of EXISTS, and
        // the second scans every sample when the kind is absent.
        let has = |kind: crate::SampleKind| -> Result<bool> {
            let exists = |sql: &str| -> Result<bool> {
                self.conn()
                    .query_row(sql, [kind.category()], |r| r.get(0))
                    .at(&path)
            };
            Ok(
                exists("SELECT EXISTS (SELECT 1 FROM rocpd_string WHERE string = ?1)")?
                    && exists("SELECT EXISTS (SELECT 1 FROM strobe_samples WHERE kind = ?1)")?,
            )
        };
        // CPU first: found in the first process, it settles the answer
        // without looking for real-time samples in every other.
        Ok(
            if !has(crate::SampleKind::Cpu)? && has(crate::SampleKind::Wall)? {
                crate::SampleKind::Wall
            } else {
                crate::SampleKind::Cpu
            },
        )
    }

    /// The sampling period (ns) the profile was recorded with: from
    /// `sampling_cputime_freq` or `sampling_freq` in `strobe_settings`,
    /// else the default 250 Hz.
    pub fn sampling_period_ns(&self) -> i64 {
        // The first process's, the CPU-time timer's first: each query stops
        // at its first row (no sort over every process's settings).
        let first = |name: &str| -> Option<String> {
            self.conn()
                .query_row(
                    "SELECT value FROM strobe_settings WHERE name = ?1 LIMIT 1",
                    [name],
                    |r| r.get(0),
                )
                .ok()
        };
        let freq = first("sampling_cputime_freq").or_else(|| first("sampling_freq"));
        let hz = freq
            .and_then(|f| {
                f.trim()
                    .trim_end_matches("Hz")
                    .trim_end_matches("hz")
                    .trim()
                    .parse::<f64>()
                    .ok()
            })
            .filter(|h| *h > 0.0)
            .unwrap_or(250.0);
        (1e9 / hz).round() as i64
    }
}
