//! What the writer records about the run itself: settings, clock
//! comparisons and causal-profiling experiments.
//!
//! Owns the `impl Writer` methods that write `strobe_settings`,
//! `strobe_clock_sync`, `strobe_causal_experiment` with its
//! `strobe_causal_progress` rows, and `strobe_causal_sample`. It never
//! computes a causal result ([`crate::causal`] does) and never commits on
//! its own (`writer/mod.rs` does).

use rusqlite::params;

use super::records::{CausalExperiment, ClockSync};
use super::stmts::i;
use super::Writer;
use crate::error::{Result, SqlContext};

impl Writer {
    /// Records a setting or fact in `strobe_settings`.
    pub fn add_setting(&mut self, name: &str, value: &str) -> Result<()> {
        self.begin_row()?;
        self.conn
            .execute(
                &format!(
                    "INSERT INTO \"strobe_settings{}\" (name, value) VALUES (?1, ?2)",
                    self.suffix
                ),
                params![name, value],
            )
            .at(&self.path)?;
        self.end_row(1)
    }

    /// Appends a clock comparison with the reference process
    /// (`strobe_clock_sync`; see [`crate::schema::CLOCK_SYNC_TABLE`]).
    pub fn clock_sync(&mut self, c: &ClockSync<'_>) -> Result<()> {
        self.begin_row()?;
        let sql = format!(
            "INSERT INTO \"strobe_clock_sync{}\" (phase, local_ns, offset_ns, rtt_ns, reference_rank) VALUES (?1, ?2, ?3, ?4, ?5)",
            self.suffix
        );
        self.conn
            .prepare_cached(&sql)
            .and_then(|mut st| {
                st.execute(params![
                    c.phase,
                    i(c.local_ns),
                    c.offset_ns,
                    i(c.rtt_ns),
                    c.reference_rank
                ])
            })
            .at(&self.path)?;
        self.end_row(1)
    }

    /// Records one causal-profiling experiment and what each of its
    /// progress points counted (`strobe_causal_experiment` and one
    /// `strobe_causal_progress` row per entry of `e.progress`).
    pub fn causal_experiment(&mut self, e: &CausalExperiment) -> Result<()> {
        self.begin_row()?;
        let s = &self.suffix;
        let sql = format!(
            "INSERT INTO \"strobe_causal_experiment{s}\" (variant, mode, selection, file, line, function, speedup, start_ns, duration_ns, delay_ns, selected_samples, period_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
        );
        self.conn
            .prepare_cached(&sql)
            .and_then(|mut st| {
                st.execute(params![
                    e.variant,
                    e.mode,
                    e.selection,
                    e.file,
                    e.line,
                    e.function,
                    e.speedup,
                    i(e.start_ns),
                    i(e.duration_ns),
                    i(e.delay_ns),
                    i(e.selected_samples),
                    i(e.period_ns)
                ])
            })
            .at(&self.path)?;
        let id = self.conn.last_insert_rowid();
        let sql = format!(
            "INSERT INTO \"strobe_causal_progress{s}\" (experiment, name, kind, visits, departures, in_flight) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
        );
        {
            let mut st = self.conn.prepare_cached(&sql).at(&self.path)?;
            for p in &e.progress {
                st.execute(params![
                    id,
                    p.name,
                    p.kind.as_str(),
                    i(p.visits),
                    i(p.departures),
                    p.in_flight
                ])
                .at(&self.path)?;
            }
        }
        self.end_row(1 + e.progress.len())
    }

    /// Records the samples a causal run counted in scope, per location
    /// (`file:line` in line mode, the function name in function mode), in
    /// `strobe_causal_sample`. Rows are appended: counts of one location
    /// given in several calls add up (readers sum them).
    pub fn causal_samples(&mut self, counts: &[(String, u64)]) -> Result<()> {
        if counts.is_empty() {
            return Ok(());
        }
        self.begin_row()?;
        let sql = format!(
            "INSERT INTO \"strobe_causal_sample{}\" (location, count) VALUES (?1, ?2)",
            self.suffix
        );
        {
            let mut st = self.conn.prepare_cached(&sql).at(&self.path)?;
            for (location, count) in counts {
                st.execute(params![location, i(*count)]).at(&self.path)?;
            }
        }
        self.end_row(counts.len())
    }
}
