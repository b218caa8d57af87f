//! Tables in documented layouts as rows of values, for writers that copy
//! them whole.
//!
//! Owns [`Table`] (which table, with its columns and order) and
//! [`Profile::table_rows`]: the CSV export's small tables and the Python
//! package's named tables. The rows come as SQLite values with the
//! column names first, exactly as the standard views hold them. It never
//! reads the event streams (they are visited, see [`super::ProfileSink`])
//! and never formats output.

use crate::reader::Profile;
use crate::{Result, Value};

/// A table of a profile in a documented layout, copied whole: the small
/// tables of the CSV export (docs/exports.md) and the named tables of the
/// Python package (docs/python.md), each with its columns and order.
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
    /// The Python package's `regions`: id, guid, pid, tid, category,
    /// name, start, end, duration, stack id, event id; by start, longest
    /// first, then guid and id.
    FrameRegions,
    /// The Python package's `threads`: guid, pid, tid, name, start, end,
    /// hostname; by start, guid, tid.
    FrameThreads,
    /// The Python package's `processes`: guid, pid, ppid, command,
    /// hostname, machine id, init, start, end, fini; by start, guid.
    FrameProcesses,
    /// The Python package's `counters`: guid, pid, tid, name, units,
    /// timestamp, value; by timestamp, guid, name, id.
    FrameCounters,
    /// The Python package's `stacks`: guid, stack id, depth, function,
    /// module, relative pc, file, line of every call site's frame; by
    /// guid, then stack id.
    FrameStacks,
}

impl Table {
    /// The Python package's table of this name (`regions`, `threads`,
    /// `processes`, `counters`, `stacks`).
    pub fn frame(name: &str) -> Option<Table> {
        Some(match name {
            "regions" => Table::FrameRegions,
            "threads" => Table::FrameThreads,
            "processes" => Table::FrameProcesses,
            "counters" => Table::FrameCounters,
            "stacks" => Table::FrameStacks,
            _ => return None,
        })
    }

    fn sql(self) -> &'static str {
        match self {
            Table::Processes => "SELECT guid, hostname, machine_id, ppid, pid, init, start, \"end\", fini, command FROM processes ORDER BY start, guid",
            Table::Threads => "SELECT guid, pid, tid, name, start, \"end\" FROM threads ORDER BY pid, tid",
            Table::Counters => "SELECT guid, pid, tid, name, units, timestamp, value FROM strobe_counters ORDER BY timestamp",
            Table::Top => "SELECT name, total_calls, total_duration, average, percentage FROM top",
            Table::FrameRegions => "SELECT id, guid, pid, tid, category, name, start, \"end\", duration, stack_id, event_id FROM regions ORDER BY start, \"end\" DESC, guid, id",
            Table::FrameThreads => "SELECT guid, pid, tid, name, start, \"end\", hostname FROM threads ORDER BY start, guid, tid",
            Table::FrameProcesses => "SELECT guid, pid, ppid, command, hostname, machine_id, init, start, \"end\", fini FROM processes ORDER BY start, guid",
            Table::FrameCounters => "SELECT guid, pid, tid, name, units, timestamp, value FROM strobe_counters ORDER BY timestamp, guid, name, id",
            Table::FrameStacks => "SELECT S.guid, S.id AS stack_id, S.depth, S.function, S.module, S.rel_pc, S.file, S.line FROM (SELECT C.guid, C.id, C.depth, F.function, F.module, F.rel_pc, F.file, F.line FROM strobe_callsite C JOIN strobe_frames F ON F.id = C.frame_id AND F.guid = C.guid) S ORDER BY S.guid, S.id",
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
        self.conn()
            .query_row(SQL, [], |r| r.get(0))
            .map_err(crate::scan::qerr(SQL))
    }
}
