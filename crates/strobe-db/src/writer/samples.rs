//! The writer's appends of modules, frames, call stacks and samples.
//!
//! Owns the `impl Writer` methods that write `strobe_module`,
//! `strobe_frame` and `strobe_callsite` (interned through the writer's
//! caches), the `rocpd_sample` rows with their shared events, the end-of-run
//! weight corrections, and the frames' names during a run (through
//! [`crate::symbols`], which owns the update). It never resolves a symbol
//! and never commits on its own (`writer/mod.rs` does).

use rusqlite::params;

use super::records::{
    CallSiteId, EventId, FrameId, ModuleId, ModuleRow, SampleMeta, StackFrame, StringId, TrackId,
    WeightScale,
};
use super::stmts::i;
use super::Writer;
use crate::error::{Result, SqlContext};
use crate::symbols::FrameSymbols;

impl Writer {
    /// Adds a loaded module; frames refer to it by the returned id.
    pub fn add_module(&mut self, m: &ModuleRow<'_>) -> Result<ModuleId> {
        self.begin_row()?;
        {
            let st = &mut self.stmts.module;
            {
                st.execute(params![
                    self.proc_row,
                    m.path,
                    m.build_id,
                    i(m.load_address),
                    i(m.size),
                    i(m.file_offset),
                    m.load_ns.map(i)
                ])
            }
        }
        .at(&self.path)?;
        let id = self.conn.last_insert_rowid();
        self.end_row(1)?;
        Ok(ModuleId(id))
    }

    /// Records when a module was unloaded (`dlclose`).
    pub fn end_module(&mut self, module: ModuleId, unload_ns: u64) -> Result<()> {
        self.begin_row()?;
        self.conn
            .execute(
                &format!(
                    "UPDATE \"strobe_module{}\" SET unload_time = ?2 WHERE id = ?1",
                    self.suffix
                ),
                params![module.0, i(unload_ns)],
            )
            .at(&self.path)?;
        self.end_row(1)
    }

    /// Interns a frame (module + relative pc); names come later through
    /// [`Writer::set_frame_symbols`] or [`crate::symbols::set_frame_symbols`].
    pub fn intern_frame(&mut self, f: StackFrame) -> Result<FrameId> {
        let m = f.module.map_or(0, |m| m.0);
        if let Some(id) = self.caches.frame(m, f.rel_pc) {
            return Ok(FrameId(id));
        }
        self.begin_row()?;
        {
            let st = &mut self.stmts.frame;
            st.execute(params![f.module.map(|m| m.0), i(f.rel_pc)])
        }
        .at(&self.path)?;
        let id = self.conn.last_insert_rowid();
        self.caches.add_frame(m, f.rel_pc, id);
        self.end_row(1)?;
        Ok(FrameId(id))
    }

    /// Interns a call stack given leaf first (`frames[0]` is the innermost
    /// frame, as unwinders produce it) and returns the call site of the leaf.
    /// Returns `None` for an empty stack.
    pub fn intern_stack(&mut self, frames: &[StackFrame]) -> Result<Option<CallSiteId>> {
        if let Some(leaf) = self.caches.stack(frames) {
            return Ok((leaf != 0).then_some(CallSiteId(leaf)));
        }
        let mut parent = 0i64;
        for (depth, f) in frames.iter().rev().enumerate() {
            let frame = self.intern_frame(*f)?.0;
            parent = match self.caches.callsite(parent, frame) {
                Some(id) => id,
                None => {
                    self.begin_row()?;
                    {
                        let st = &mut self.stmts.callsite;
                        {
                            st.execute(params![
                                (parent != 0).then_some(parent),
                                frame,
                                depth as i64
                            ])
                        }
                    }
                    .at(&self.path)?;
                    let id = self.conn.last_insert_rowid();
                    self.caches.add_callsite(parent, frame, id);
                    self.end_row(1)?;
                    id
                }
            };
        }
        self.caches.add_stack(frames, parent);
        Ok((parent != 0).then_some(CallSiteId(parent)))
    }

    /// Appends one sample: `frames` leaf first, on `track` (a thread's
    /// sample track from [`Writer::add_track`]). Writes an event (category
    /// = the sample's kind, `stack_id` = the interned call site; one per
    /// kind and call site) and a `rocpd_sample` row whose `extdata` holds
    /// the weight (`{"weight_ns":N}`).
    pub fn append_sample(
        &mut self,
        track: TrackId,
        sample: SampleMeta,
        frames: &[StackFrame],
    ) -> Result<EventId> {
        let kind = sample.kind as usize;
        let cat = match self.sample_categories[kind] {
            Some(c) => c,
            None => {
                let c = self.intern_string(sample.kind.category())?.0;
                self.sample_categories[kind] = Some(c);
                c
            }
        };
        let stack = self.intern_stack(frames)?;
        let key = (kind, stack.map_or(0, |c| c.0));
        let ev = match self.sample_events.get(&key) {
            Some(&id) => EventId(id),
            None => {
                let ev = self.append_event(Some(StringId(cat)), stack, None, &[])?;
                self.sample_events.insert(key, ev.0);
                ev
            }
        };
        self.begin_row()?;
        self.stmts
            .samples
            .push([track.0, i(sample.timestamp_ns), ev.0, i(sample.weight_ns)])
            .at(&self.path)?;
        self.totals.samples += 1;
        self.end_row(1)?;
        Ok(ev)
    }

    /// Applies weight corrections found at the end of a run (see
    /// [`WeightScale`]). One pass over the samples.
    pub fn scale_sample_weights(&mut self, factors: &[WeightScale]) -> Result<()> {
        if factors.is_empty() {
            return Ok(());
        }
        let mut rows = Vec::with_capacity(factors.len());
        for f in factors {
            let category = self.intern_string(f.kind.category())?.0;
            rows.push([
                f.track.0,
                category,
                i(f.until_ns),
                i(f.numerator),
                i(f.denominator.max(1)),
            ]);
        }
        self.begin_row()?;
        self.flush_bulk()?;
        let s = &self.suffix;
        let result = (|| {
            self.conn.execute_batch(
                "CREATE TEMP TABLE IF NOT EXISTS strobe_weight_factor \
                 (track INTEGER, category INTEGER, until INTEGER, num INTEGER, den INTEGER); \
                 DELETE FROM strobe_weight_factor;",
            )?;
            {
                let mut st = self
                    .conn
                    .prepare("INSERT INTO strobe_weight_factor VALUES (?1, ?2, ?3, ?4, ?5)")?;
                for r in &rows {
                    st.execute(*r)?;
                }
            }
            self.conn.execute(
                &format!(
                    "UPDATE \"rocpd_sample{s}\" AS S SET extdata = json_object('weight_ns', \
                     COALESCE(json_extract(S.extdata, '$.weight_ns'), 0) * F.num / F.den) \
                     FROM strobe_weight_factor F, \"rocpd_event{s}\" E \
                     WHERE F.track = S.track_id AND S.timestamp <= F.until \
                     AND E.id = S.event_id AND E.category_id = F.category"
                ),
                [],
            )?;
            self.conn.execute_batch("DROP TABLE strobe_weight_factor")
        })();
        result.at(&self.path)?;
        // Rows changed, none added.
        self.end_row(0)
    }

    /// Sets function, file and line of frames (symbolization). Can run
    /// during the run or at its end; after the run use
    /// [`crate::symbols::set_frame_symbols`] on the closed file.
    pub fn set_frame_symbols(&mut self, symbols: &[FrameSymbols<'_>]) -> Result<()> {
        self.begin_row()?;
        crate::symbols::update_frames(&self.conn, &self.suffix, symbols).at(&self.path)?;
        self.end_row(symbols.len())
    }
}
