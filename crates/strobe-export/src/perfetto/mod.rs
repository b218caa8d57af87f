//! Perfetto trace output (`.pftrace`).
//!
//! Owns the Perfetto format's entry points: [`write_perfetto`], which
//! feeds a whole profile to a [`PerfettoWriter`] as a sink of its visit,
//! and the module's parts: the streaming encoder (`writer`: tracks,
//! slices, samples, counters, flows), the interning of a sequence
//! (`intern`), the framed packet stream with its hand-encoded hot
//! packets (`packets`), track uuids and flow ids (`ids`) and the
//! protos ([`proto`]). On-CPU samples become `PerfSample`s; off-CPU
//! samples become `off-CPU: <function>` slices over the blocked time on
//! their thread's track; correlation ids and message keys become flows.
//! It never holds the trace: memory stays bounded (see
//! [`PerfettoWriter`]).

mod ids;
mod intern;
mod packets;
pub mod proto;
mod writer;

use std::io::Write;

use strobe_db::visit::{
    CounterRow, Order, ProfileSink, RegionRow, Run, SampleEvent, Stacks, ThreadRecord,
};
use strobe_db::Profile;

use crate::error::{ExportError, Result};

pub use ids::{message_flow_id, process_uuid, thread_uuid};
pub use writer::{PerfettoStats, PerfettoWriter};

/// Converts a whole profile (all processes of all inputs, window applied)
/// to one Perfetto trace on `out`, streaming: regions, samples and counters
/// merged in time order (see [`Order::Merged`]).
pub fn write_perfetto<W: Write>(p: &Profile, out: W) -> Result<PerfettoStats> {
    let mut sink = Sink {
        out: Some(out),
        w: None,
    };
    p.visit(&mut sink)?;
    match sink.w {
        Some(w) => Ok(w.finish()?.0),
        None => Err(ExportError::Usage(
            "the Perfetto writer was not started".into(),
        )),
    }
}

/// [`PerfettoWriter`] as a sink of the profile, started on the [`Run`]
/// (the clock base, shifts and modules it needs).
struct Sink<W: Write> {
    out: Option<W>,
    w: Option<PerfettoWriter<W>>,
}

impl<W: Write> Sink<W> {
    fn writer(&mut self) -> Result<&mut PerfettoWriter<W>> {
        self.w
            .as_mut()
            .ok_or_else(|| ExportError::Usage("the Perfetto writer was not started".into()))
    }
}

impl<W: Write> ProfileSink for Sink<W> {
    type Error = ExportError;

    fn order(&self) -> Order {
        Order::Merged
    }

    fn begin(&mut self, run: &Run) -> Result<()> {
        let Some(out) = self.out.take() else {
            return Err(ExportError::Usage(
                "a Perfetto sink visits one profile".into(),
            ));
        };
        let base = run.first_start().max(0) as u64;
        let mut w = PerfettoWriter::new(out, run.shifts.clone(), run.modules.clone(), base)?;
        for pr in &run.processes {
            w.process(pr)?;
        }
        self.w = Some(w);
        Ok(())
    }

    fn thread(&mut self, t: &ThreadRecord) -> Result<()> {
        self.writer()?.thread(t)
    }

    fn region(&mut self, r: &RegionRow) -> Result<()> {
        self.writer()?.region(r)
    }

    fn sample(&mut self, s: &SampleEvent<'_>, stacks: &mut Stacks<'_>) -> Result<()> {
        self.writer()?
            .sample_in(*s, &mut |g, id| Ok(stacks.resolve(g, id)?))
    }

    fn counter(&mut self, c: &CounterRow) -> Result<()> {
        self.writer()?.counter(c)
    }
}
