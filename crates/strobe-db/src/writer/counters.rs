//! The writer's appends of agents, counters, metrics and memory operations.
//!
//! Owns the `impl Writer` methods that write `rocpd_info_agent` (the CPU
//! agent counters refer to, added with the first counter),
//! `rocpd_info_pmc`, `rocpd_pmc_event`, `strobe_counter_sample`,
//! `strobe_metric` and `rocpd_memory_allocate`. It never reads a counter
//! itself (the collector does) and never commits on its own
//! (`writer/mod.rs` does).

use rusqlite::params;

use super::records::{
    AgentId, AgentInfo, AgentKind, AllocOp, CounterId, CounterInfo, EventId, MemLevel, MemoryOp,
    MetricRow, TrackId,
};
use super::stmts::i;
use super::Writer;
use crate::error::{Result, SqlContext};

impl Writer {
    /// Adds a compute agent (`rocpd_info_agent`).
    pub fn add_agent(&mut self, a: &AgentInfo<'_>) -> Result<AgentId> {
        self.begin_row()?;
        let kind = match a.kind {
            AgentKind::Cpu => "CPU",
            AgentKind::Gpu => "GPU",
        };
        self.conn
            .execute(
                &format!("INSERT INTO \"rocpd_info_agent{}\" (nid, pid, type, absolute_index, logical_index, type_index, name, model_name, vendor_name, product_name) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)", self.suffix),
                params![self.nid, self.proc_row, kind, a.absolute_index, a.logical_index, a.type_index, a.name, a.model_name, a.vendor_name, a.product_name],
            )
            .at(&self.path)?;
        let id = self.conn.last_insert_rowid();
        self.end_row(1)?;
        Ok(AgentId(id))
    }

    /// The host's CPU as an agent (`rocpd_info_agent`, type `CPU`), added
    /// with the first counter: rocpd's views join counters to their agent.
    fn cpu_agent(&mut self) -> Result<AgentId> {
        if let Some(a) = self.cpu_agent {
            return Ok(a);
        }
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let field = |key: &str| {
            cpuinfo.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == key).then(|| v.trim().to_string())
            })
        };
        let (model, vendor) = (field("model name"), field("vendor_id"));
        let agent = self.add_agent(&AgentInfo {
            kind: AgentKind::Cpu,
            absolute_index: 0,
            logical_index: 0,
            type_index: 0,
            name: "cpu",
            model_name: model.as_deref(),
            vendor_name: vendor.as_deref(),
            product_name: model.as_deref(),
        })?;
        self.cpu_agent = Some(agent);
        Ok(agent)
    }

    /// Describes a counter (`rocpd_info_pmc`, target CPU).
    pub fn add_counter(&mut self, c: &CounterInfo<'_>) -> Result<CounterId> {
        let agent = self.cpu_agent()?;
        self.begin_row()?;
        {
            let st = &mut self.stmts.pmc;
            {
                st.execute(params![
                    self.nid,
                    self.proc_row,
                    c.name,
                    c.description,
                    c.component,
                    c.units.unwrap_or(""),
                    if c.accumulating { "ACCUM" } else { "ABS" },
                    c.expression,
                    c.expression.is_some() as i64,
                    agent.0
                ])
            }
        }
        .at(&self.path)?;
        let id = self.conn.last_insert_rowid();
        self.end_row(1)?;
        Ok(CounterId(id))
    }

    /// [`Writer::add_counter`] with `extdata` (JSON) in its
    /// `rocpd_info_pmc` row.
    pub fn add_counter_with(&mut self, c: &CounterInfo<'_>, extdata: &str) -> Result<CounterId> {
        let id = self.add_counter(c)?;
        self.begin_row()?;
        let sql = format!(
            "UPDATE \"rocpd_info_pmc{}\" SET extdata = json(?2) WHERE id = ?1",
            self.suffix
        );
        self.conn
            .prepare_cached(&sql)
            .and_then(|mut st| st.execute(params![id.0, extdata]))
            .at(&self.path)?;
        self.end_row(0)?;
        Ok(id)
    }

    /// Appends one counter value of an event (`rocpd_pmc_event`): the
    /// change of `counter` over a region (`event` from
    /// [`Writer::append_region`]); `None` stores NULL (not read).
    pub fn append_pmc_event(
        &mut self,
        event: EventId,
        counter: CounterId,
        value: Option<f64>,
    ) -> Result<()> {
        self.begin_row()?;
        {
            let st = &mut self.stmts.pmc_event;
            st.execute(params![event.0, counter.0, value])
        }
        .at(&self.path)?;
        self.end_row(1)
    }

    /// Appends one point of a counter's time series (`strobe_counter_sample`),
    /// optionally placed on a track (per-thread counters).
    pub fn append_counter_sample(
        &mut self,
        counter: CounterId,
        track: Option<TrackId>,
        timestamp_ns: u64,
        value: f64,
    ) -> Result<()> {
        self.begin_row()?;
        {
            let st = &mut self.stmts.counter;
            st.execute(params![
                counter.0,
                track.map(|t| t.0),
                i(timestamp_ns),
                value
            ])
        }
        .at(&self.path)?;
        self.totals.counter_samples += 1;
        self.end_row(1)
    }

    /// Records a derived-metric definition the run used (`strobe_metric`).
    pub fn add_metric(&mut self, m: &MetricRow<'_>) -> Result<()> {
        self.begin_row()?;
        let sql = format!(
            "INSERT INTO \"strobe_metric{}\" (name, kind, expression, unit, description, requested) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            self.suffix
        );
        self.conn
            .prepare_cached(&sql)
            .and_then(|mut st| {
                st.execute(params![
                    m.name,
                    m.kind,
                    m.expression,
                    m.unit,
                    m.description,
                    m.requested as i64
                ])
            })
            .at(&self.path)?;
        self.end_row(1)
    }

    /// Appends a memory allocation or release (its event and its
    /// `rocpd_memory_allocate` row).
    pub fn append_memory_op(&mut self, m: &MemoryOp) -> Result<EventId> {
        let ev = self.append_event(m.category, m.stack, None, &[])?;
        let op = match m.op {
            AllocOp::Alloc => "ALLOC",
            AllocOp::Free => "FREE",
            AllocOp::Realloc => "REALLOC",
            AllocOp::Reclaim => "RECLAIM",
        };
        let level = match m.level {
            MemLevel::Real => "REAL",
            MemLevel::Virtual => "VIRTUAL",
            MemLevel::Scratch => "SCRATCH",
        };
        self.begin_row()?;
        {
            let st = &mut self.stmts.memory;
            st.execute(params![
                self.nid,
                self.proc_row,
                m.thread.0,
                m.agent.map(|a| a.0),
                op,
                level,
                i(m.start_ns),
                i(m.end_ns.max(m.start_ns)),
                i(m.address),
                i(m.size),
                ev.0
            ])
        }
        .at(&self.path)?;
        self.end_row(1)?;
        Ok(ev)
    }
}
