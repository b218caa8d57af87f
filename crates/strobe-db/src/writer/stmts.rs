//! The writer's prepared statements and how it stores integers.
//!
//! Owns preparing, once per database, the statement of every insert kind
//! the writer repeats and the multi-row inserts of the two tables that take
//! most rows (regions and samples), and the conversion of u64 times and pcs
//! to SQLite integers. It never executes a statement itself: the writer's
//! appends do.

use rusqlite::{Connection, Statement};

use crate::bulk::{self, Bulk};

/// The writer's prepared statements, one per insert kind, and the
/// multi-row inserts of the two tables that take most rows.
pub(super) struct Stmts {
    /// `rocpd_region`: tid, start, end, name_id, event_id (nid and pid are
    /// the process's, written into the statement).
    pub(super) regions: Bulk<5>,
    /// `rocpd_sample`: track_id, timestamp, event_id, weight (ns; stored as
    /// `{"weight_ns":N}` in extdata).
    pub(super) samples: Bulk<4>,
    pub(super) string: Statement<'static>,
    pub(super) thread: Statement<'static>,
    pub(super) thread_end: Statement<'static>,
    pub(super) track: Statement<'static>,
    pub(super) event: Statement<'static>,
    pub(super) arg: Statement<'static>,
    pub(super) module: Statement<'static>,
    pub(super) frame: Statement<'static>,
    pub(super) callsite: Statement<'static>,
    pub(super) pmc: Statement<'static>,
    pub(super) pmc_event: Statement<'static>,
    pub(super) counter: Statement<'static>,
    pub(super) memory: Statement<'static>,
    pub(super) begin: Statement<'static>,
    pub(super) commit: Statement<'static>,
}

impl Stmts {
    /// Prepares every statement on `conn` for the tables of suffix `s`.
    ///
    /// # Safety
    ///
    /// The statements borrow `conn` for `'static`: the caller must keep the
    /// connection at a fixed address (boxed) and drop the statements before it.
    pub(super) unsafe fn new(
        conn: &Connection,
        s: &str,
        nid: i64,
        proc_row: i64,
    ) -> rusqlite::Result<Stmts> {
        fn keep(st: Statement<'_>) -> Statement<'static> {
            // SAFETY: see `Stmts::new`: the connection outlives the statement
            // and never moves (it lives in a Box owned by the same Writer,
            // declared after `stmts` so it is dropped after them).
            unsafe { bulk::keep(st) }
        }
        Ok(Stmts {
            string: keep(conn.prepare(&format!("INSERT INTO \"rocpd_string{s}\" (string) VALUES (?1)"))?),
            thread: keep(conn.prepare(&format!("INSERT INTO \"rocpd_info_thread{s}\" (nid, ppid, pid, tid, name, start) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"))?),
            thread_end: keep(conn.prepare(&format!("UPDATE \"rocpd_info_thread{s}\" SET \"end\" = ?2 WHERE id = ?1"))?),
            track: keep(conn.prepare(&format!("INSERT INTO \"rocpd_track{s}\" (nid, pid, tid, name_id) VALUES (?1, ?2, ?3, ?4)"))?),
            event: keep(conn.prepare(&format!("INSERT INTO \"rocpd_event{s}\" (category_id, stack_id, correlation_id) VALUES (?1, ?2, ?3)"))?),
            arg: keep(conn.prepare(&format!("INSERT INTO \"rocpd_arg{s}\" (event_id, position, type, name, value) VALUES (?1, ?2, ?3, ?4, ?5)"))?),
            module: keep(conn.prepare(&format!("INSERT INTO \"strobe_module{s}\" (pid, path, build_id, load_address, size, file_offset, load_time) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"))?),
            frame: keep(conn.prepare(&format!("INSERT INTO \"strobe_frame{s}\" (module_id, rel_pc) VALUES (?1, ?2)"))?),
            callsite: keep(conn.prepare(&format!("INSERT INTO \"strobe_callsite{s}\" (parent_id, frame_id, depth) VALUES (?1, ?2, ?3)"))?),
            pmc: keep(conn.prepare(&format!("INSERT INTO \"rocpd_info_pmc{s}\" (nid, pid, agent_id, target_arch, name, symbol, description, component, units, value_type, expression, is_constant, is_derived) VALUES (?1, ?2, ?10, 'CPU', ?3, ?3, ?4, ?5, ?6, ?7, ?8, 0, ?9)"))?),
            pmc_event: keep(conn.prepare(&format!("INSERT INTO \"rocpd_pmc_event{s}\" (event_id, pmc_id, value) VALUES (?1, ?2, ?3)"))?),
            counter: keep(conn.prepare(&format!("INSERT INTO \"strobe_counter_sample{s}\" (pmc_id, track_id, timestamp, value) VALUES (?1, ?2, ?3, ?4)"))?),
            memory: keep(conn.prepare(&format!("INSERT INTO \"rocpd_memory_allocate{s}\" (nid, pid, tid, agent_id, type, level, start, \"end\", address, size, event_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"))?),
            // SAFETY: as for `keep` above.
            regions: unsafe {
                Bulk::new(
                    conn,
                    &format!("rocpd_region{s}"),
                    "nid, pid, tid, start, \"end\", name_id, event_id",
                    &format!("({nid}, {proc_row}, ?, ?, ?, ?, ?)"),
                )?
            },
            // SAFETY: as for `keep` above.
            samples: unsafe {
                Bulk::new(
                    conn,
                    &format!("rocpd_sample{s}"),
                    "track_id, timestamp, event_id, extdata",
                    "(?, ?, ?, ?)",
                )?
                .with_last_as_text(weight_json)
            },
            begin: keep(conn.prepare("BEGIN")?),
            commit: keep(conn.prepare("COMMIT")?),
        })
    }
}

/// A sample's `extdata`: `{"weight_ns":N}`.
fn weight_json(out: &mut String, weight_ns: i64) {
    use std::fmt::Write;
    let _ = write!(out, "{{\"weight_ns\":{weight_ns}}}");
}

/// Timestamps are stored as SQLite INTEGER (i64); u64 nanoseconds fit until
/// the year 2262, and pcs above 2^63 keep their bits.
#[inline]
pub(super) fn i(v: u64) -> i64 {
    v as i64
}
