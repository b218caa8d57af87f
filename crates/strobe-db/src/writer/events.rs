//! The writer's appends of strings, threads, tracks, events and regions.
//!
//! Owns the `impl Writer` methods that write `rocpd_string`,
//! `rocpd_info_thread`, `rocpd_track`, `rocpd_event` with its `rocpd_arg`
//! rows, `rocpd_region` (one event per region, or one shared per
//! category) and `strobe_region_stats`. It never opens, commits or
//! finishes the database (`writer/mod.rs` does) and never writes samples
//! or counters.

use rusqlite::params;

use super::records::{
    Arg, CallSiteId, EventId, Region, RegionStats, StringId, ThreadInfo, ThreadRef, TrackId,
};
use super::stmts::i;
use super::Writer;
use crate::error::{Result, SqlContext};
use crate::schema;

impl Writer {
    /// Interns a string: returns the id of `s` in `rocpd_string`, inserting
    /// it the first time. The cache keeps one copy per distinct string.
    pub fn intern_string(&mut self, s: &str) -> Result<StringId> {
        if let Some(id) = self.caches.string(s) {
            return Ok(StringId(id));
        }
        self.begin_row()?;
        {
            let st = &mut self.stmts.string;
            st.execute([s])
        }
        .at(&self.path)?;
        let id = self.conn.last_insert_rowid();
        self.caches.add_string(s, id);
        self.end_row(1)?;
        Ok(StringId(id))
    }

    /// Adds a thread; returns its row id (use it, not the tid, everywhere).
    pub fn add_thread(&mut self, t: &ThreadInfo<'_>) -> Result<ThreadRef> {
        self.begin_row()?;
        {
            let st = &mut self.stmts.thread;
            {
                st.execute(params![
                    self.nid,
                    self.ppid,
                    self.proc_row,
                    t.tid,
                    t.name,
                    t.start_ns.map(i)
                ])
            }
        }
        .at(&self.path)?;
        let id = self.conn.last_insert_rowid();
        self.end_row(1)?;
        Ok(ThreadRef(id))
    }

    /// Records the end time of a thread.
    pub fn end_thread(&mut self, thread: ThreadRef, end_ns: u64) -> Result<()> {
        self.begin_row()?;
        {
            let st = &mut self.stmts.thread_end;
            st.execute(params![thread.0, i(end_ns)])
        }
        .at(&self.path)?;
        self.end_row(1)
    }

    /// Sets or replaces the name of a thread (names are often given after
    /// the thread started; the last one wins).
    pub fn set_thread_name(&mut self, thread: ThreadRef, name: &str) -> Result<()> {
        self.begin_row()?;
        let sql = format!(
            "UPDATE \"rocpd_info_thread{}\" SET name = ?2 WHERE id = ?1",
            self.suffix
        );
        self.conn
            .prepare_cached(&sql)
            .and_then(|mut st| st.execute(params![thread.0, name]))
            .at(&self.path)?;
        self.end_row(1)
    }

    /// Adds a track (a timeline samples or counters are placed on), for a
    /// thread or for the whole process (`thread = None`).
    pub fn add_track(&mut self, thread: Option<ThreadRef>, name: &str) -> Result<TrackId> {
        let name = self.intern_string(name)?;
        self.begin_row()?;
        {
            let st = &mut self.stmts.track;
            st.execute(params![
                self.nid,
                self.proc_row,
                thread.map(|t| t.0),
                name.0
            ])
        }
        .at(&self.path)?;
        let id = self.conn.last_insert_rowid();
        self.end_row(1)?;
        Ok(TrackId(id))
    }

    /// Appends an event row (the record regions, samples and counter events
    /// hang off) with its arguments.
    pub fn append_event(
        &mut self,
        category: Option<StringId>,
        stack: Option<CallSiteId>,
        correlation_id: Option<u64>,
        args: &[Arg<'_>],
    ) -> Result<EventId> {
        self.begin_row()?;
        {
            let st = &mut self.stmts.event;
            st.execute(params![
                category.map(|c| c.0),
                stack.map(|c| c.0),
                correlation_id.map(i)
            ])
        }
        .at(&self.path)?;
        let id = self.conn.last_insert_rowid();
        if !args.is_empty() {
            let st = &mut self.stmts.arg;
            for (pos, a) in args.iter().enumerate() {
                st.execute(params![id, pos as i64, a.ty, a.name, a.value])
                    .at(&self.path)?;
            }
        }
        self.end_row(1 + args.len())?;
        Ok(EventId(id))
    }

    /// Appends a completed region with an event row of its own (and its
    /// args); returns that event, to which counter values
    /// ([`Writer::append_pmc_event`]) may refer.
    pub fn append_region(&mut self, r: &Region<'_>) -> Result<EventId> {
        let ev = self.append_event(r.category, r.stack, r.correlation_id, r.args)?;
        self.push_region(r, ev)?;
        Ok(ev)
    }

    /// Appends a completed region, the way that costs least: a region
    /// without args, stack or correlation id refers to the one event row
    /// its category shares with every such region (one row per region, not
    /// two); any other gets an event of its own as with
    /// [`Writer::append_region`]. Nothing may be attached to the event
    /// afterwards, so it is not returned.
    pub fn append_region_shared(&mut self, r: &Region<'_>) -> Result<()> {
        if !r.args.is_empty() || r.stack.is_some() || r.correlation_id.is_some() {
            return self.append_region(r).map(|_| ());
        }
        let key = r.category.map_or(0, |c| c.0);
        let ev = match self.region_events.iter().find(|(k, _)| *k == key) {
            Some(&(_, id)) => EventId(id),
            None => {
                let ev = self.append_event(r.category, None, None, &[])?;
                self.region_events.push((key, ev.0));
                ev
            }
        };
        self.push_region(r, ev)
    }

    /// The region row of `r`, whose event is `ev`.
    fn push_region(&mut self, r: &Region<'_>, ev: EventId) -> Result<()> {
        self.begin_row()?;
        self.stmts
            .regions
            .push([
                r.thread.0,
                i(r.start_ns),
                i(r.end_ns.max(r.start_ns)),
                r.name.0,
                ev.0,
            ])
            .at(&self.path)?;
        self.totals.regions += 1;
        self.end_row(1)
    }

    /// Writes the statistics rows `(id, stats)`, replacing rows written
    /// before with the same id: the caller numbers each (thread, name)
    /// from 1 and writes the rows again as they change.
    pub fn set_region_stats(&mut self, rows: &[(i64, RegionStats)]) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        self.begin_row()?;
        let sql = format!(
            "INSERT OR REPLACE INTO \"{}{}\" (id, thread_id, name_id, calls, total_ns, self_ns, kept, kept_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            schema::REGION_STATS_TABLE,
            self.suffix
        );
        {
            let mut st = self.conn.prepare_cached(&sql).at(&self.path)?;
            for (id, r) in rows {
                st.execute(params![
                    id,
                    r.thread.0,
                    r.name.0,
                    i(r.calls),
                    i(r.total_ns),
                    i(r.self_ns),
                    i(r.kept),
                    i(r.kept_ns)
                ])
                .at(&self.path)?;
            }
        }
        self.end_row(rows.len())
    }
}
