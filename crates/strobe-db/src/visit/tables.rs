//! The small tables as rows of values, for writers that copy them whole.
//!
//! Owns [`Table`] (which table, with its columns and order) and
//! [`Profile::table_rows`]. The rows come as SQLite values with the
//! column names first, exactly as the standard views hold them. It never
//! reads the event streams (they are visited, see [`super::ProfileSink`])
//! and never formats output.

use crate::reader::Profile;
use crate::{Result, Value};

/// A small table of a profile, copied whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    /// `processes`: guid, hostname, machine id, ppid, pid, init, start,
    /// end, fini, command; by start, then guid.
    Processes,
    /// `threads`: guid, pid, tid, name, start, end; by pid, then tid.
    Threads,
    /// `strobe_counters`: guid, pid, tid, name, units, timestamp, value;
    /// by timestamp.
    Counters,
    /// rocpd's `top` view: name, total calls, total duration (µs),
    /// average (µs), percentage.
    Top,
}

impl Table {
    fn sql(self) -> &'static str {
        match self {
            Table::Processes => "SELECT guid, hostname, machine_id, ppid, pid, init, start, \"end\", fini, command FROM processes ORDER BY start, guid",
            Table::Threads => "SELECT guid, pid, tid, name, start, \"end\" FROM threads ORDER BY pid, tid",
            Table::Counters => "SELECT guid, pid, tid, name, units, timestamp, value FROM strobe_counters ORDER BY timestamp",
            Table::Top => "SELECT name, total_calls, total_duration, average, percentage FROM top",
        }
    }
}

impl Profile {
    /// Streams `table` (window applied where it has times): `on_columns`
    /// gets the column names once, `on_row` each row; returns the rows.
    pub fn table_rows(
        &self,
        table: Table,
        on_columns: &mut dyn FnMut(&[String]),
        on_row: &mut dyn FnMut(&[Value]) -> Result<()>,
    ) -> Result<u64> {
        self.query_each(table.sql(), on_columns, on_row)
    }

    /// Whether the profile holds device activity (kernel dispatches or
    /// memory copies): rows of rocpd's `top` view that regions do not give.
    pub fn has_device_activity(&self) -> Result<bool> {
        const SQL: &str = "SELECT EXISTS (SELECT 1 FROM rocpd_kernel_dispatch) \
                           OR EXISTS (SELECT 1 FROM rocpd_memory_copy)";
        self.connection()
            .query_row(SQL, [], |r| r.get(0))
            .map_err(crate::scan::qerr(SQL))
    }
}
