//! Visiting a profile: the one way the exporters read it.
//!
//! Owns [`ProfileSink`], [`Profile::visit`] and the records a visit hands
//! over. A visit loads the small tables first ([`Run`]: processes with
//! their clock alignment, modules, the profile's time kind and sampling
//! period), then streams the threads, then the event streams a sink asks
//! for ([`Order`]): regions and markers with their arguments, samples
//! with their weights (stacks resolved on demand through [`Stacks`]) or
//! counted per stack, and counter values, each in time order, in bounded
//! memory. The producer knows nothing of its consumers: each output
//! format is one implementation of [`ProfileSink`]. It never writes to an
//! input and never formats output.

mod clock;
mod counters;
mod meta;
mod regions;
mod runsort;
mod sample_table;
mod samples;
mod tables;

use std::collections::HashMap;

use crate::reader::Profile;
pub use crate::reader::{CounterRow, ResolvedFrame, ThreadRecord};
pub use crate::scan::{ProcessSamples, SampleGroup};
pub use crate::writer::SampleKind;
use crate::DbError;
pub use clock::{clock_shifts, Shift};
pub use meta::{ModuleRow, ProcessRow};
pub use regions::RegionRow;
pub use samples::{SampleEvent, Stacks};
pub use tables::Table;

/// One of the event streams of a profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Regions and markers ([`ProfileSink::region`]), by start, longest
    /// first at equal starts (parents before their children).
    Regions,
    /// Call-stack samples one by one ([`ProfileSink::sample`]), by time,
    /// then thread.
    Samples,
    /// Call-stack samples counted per process, thread and stack
    /// ([`ProfileSink::sample_counts`]), one process at a time, in the
    /// order of the processes' table sets.
    SampleCounts,
    /// Counter values ([`ProfileSink::counter`]), by time.
    Counters,
}

/// In which order a sink takes the event streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// The streams named, each whole and in its own order, one after the
    /// other; streams not named are not read. The readers of every named
    /// stream start at once: later streams are scanned and sorted while
    /// the sink takes the earlier ones.
    Sequence(&'static [Stream]),
    /// Regions, samples and counters merged into one time order; on a tie
    /// regions come first, then samples, then counters.
    Merged,
}

/// What a visit hands over before any event: the small tables, whole.
#[derive(Debug, Clone)]
pub struct Run {
    /// Every process, by start time.
    pub processes: Vec<ProcessRow>,
    /// What puts each process (by guid) on the profile's one time base.
    pub shifts: HashMap<String, Shift>,
    /// Every loaded module, by process.
    pub modules: Vec<ModuleRow>,
    /// The kind of the samples that measure the threads' time (CPU time,
    /// or real time where no CPU-time sample exists).
    pub time_kind: SampleKind,
    /// What an on-CPU sample without a weight stands for (ns).
    pub period_ns: i64,
}

impl Run {
    /// The earliest process start (ns), 0 without one.
    pub fn first_start(&self) -> i64 {
        self.processes
            .iter()
            .filter_map(|p| p.start)
            .min()
            .unwrap_or(0)
    }
}

/// A consumer of a profile: every method has a default that ignores what
/// it is given, so a sink implements what it shows. Errors of the sink's
/// own (a full disk) stop the visit and come back from it.
pub trait ProfileSink {
    /// The sink's errors; the visit's own are database errors.
    type Error: From<DbError>;

    /// Which event streams, in which order.
    fn order(&self) -> Order;

    /// Whether [`Stream::SampleCounts`] resolves every counted stack
    /// ([`ProcessSamples::stacks`]).
    fn resolve_counted_stacks(&self) -> bool {
        false
    }

    /// The small tables, before anything else.
    fn begin(&mut self, _run: &Run) -> Result<(), Self::Error> {
        Ok(())
    }

    /// One thread, after [`ProfileSink::begin`] and before any event.
    fn thread(&mut self, _thread: &ThreadRecord) -> Result<(), Self::Error> {
        Ok(())
    }

    /// One region or marker.
    fn region(&mut self, _region: &RegionRow) -> Result<(), Self::Error> {
        Ok(())
    }

    /// One sample; its stack, when needed, from `stacks`.
    fn sample(
        &mut self,
        _sample: &SampleEvent<'_>,
        _stacks: &mut Stacks<'_>,
    ) -> Result<(), Self::Error> {
        Ok(())
    }

    /// One process's samples counted per thread and stack.
    fn sample_counts(&mut self, _counts: ProcessSamples) -> Result<(), Self::Error> {
        Ok(())
    }

    /// One counter value.
    fn counter(&mut self, _counter: &CounterRow) -> Result<(), Self::Error> {
        Ok(())
    }

    /// The end of a stream: after its last record in an
    /// [`Order::Sequence`]; after the last record of all, for each stream
    /// in turn, in [`Order::Merged`].
    fn stream_end(&mut self, _stream: Stream) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// A started event stream.
enum Started<'p> {
    Regions(regions::Regions<'p>),
    Samples(samples::Samples<'p>),
    SampleCounts,
    Counters(counters::Counters<'p>),
}

impl Profile {
    /// The small tables, loaded whole: what a visit begins with.
    pub fn run(&self) -> crate::Result<Run> {
        let processes = meta::processes(self)?;
        Ok(Run {
            shifts: clock_shifts(&processes),
            processes,
            modules: meta::modules(self)?,
            time_kind: self.time_kind()?,
            period_ns: self.sampling_period_ns(),
        })
    }

    /// Hands the profile (window applied) to `sink`: [`Run`], the threads,
    /// then the event streams in the sink's [`Order`].
    pub fn visit<S: ProfileSink>(&self, sink: &mut S) -> Result<(), S::Error> {
        let run = self.run()?;
        sink.begin(&run)?;
        for t in self.threads()? {
            sink.thread(&t?)?;
        }
        let mut stacks = Stacks::new(self);
        match sink.order() {
            Order::Sequence(streams) => {
                // Every reader starts now, the later ones while the sink
                // takes the earlier streams.
                let mut started = Vec::with_capacity(streams.len());
                for s in streams {
                    started.push(match s {
                        Stream::Samples => Started::Samples(samples::samples(self, run.time_kind)?),
                        Stream::Regions => Started::Regions(regions::regions(self)?),
                        Stream::SampleCounts => Started::SampleCounts,
                        Stream::Counters => Started::Counters(counters::counters(self)?),
                    });
                }
                for (s, &stream) in started.into_iter().zip(streams) {
                    self.drain(s, sink, &mut stacks, run.period_ns)?;
                    sink.stream_end(stream)?;
                }
            }
            Order::Merged => {
                self.visit_merged(&run, sink, &mut stacks)?;
                for stream in [Stream::Regions, Stream::Samples, Stream::Counters] {
                    sink.stream_end(stream)?;
                }
            }
        }
        Ok(())
    }

    /// Hands one started stream to `sink`, whole.
    fn drain<S: ProfileSink>(
        &self,
        stream: Started<'_>,
        sink: &mut S,
        stacks: &mut Stacks<'_>,
        period_ns: i64,
    ) -> Result<(), S::Error> {
        match stream {
            Started::Regions(rs) => {
                for r in rs {
                    sink.region(&r?)?;
                }
            }
            Started::Samples(mut ss) => {
                while let Some(row) = ss.next_row() {
                    let (k, raw) = row?;
                    sink.sample(&SampleEvent::of(ss.guid(k), &raw), stacks)?;
                }
            }
            Started::SampleCounts => {
                let resolve = sink.resolve_counted_stacks();
                // The sink's own error comes back as is, not as the
                // stand-in the counting workers stop on.
                let mut failed = None;
                let counted = crate::scan::for_each_process(self, period_ns, resolve, &mut |ps| {
                    sink.sample_counts(ps).map_err(|e| {
                        failed = Some(e);
                        DbError::SinkStopped
                    })
                });
                if let Some(e) = failed {
                    return Err(e);
                }
                counted?;
            }
            Started::Counters(cs) => {
                for c in cs {
                    sink.counter(&c?)?;
                }
            }
        }
        Ok(())
    }

    /// Regions, samples and counters in one time order (see
    /// [`Order::Merged`]).
    fn visit_merged<S: ProfileSink>(
        &self,
        run: &Run,
        sink: &mut S,
        stacks: &mut Stacks<'_>,
    ) -> Result<(), S::Error> {
        let mut regions = regions::regions(self)?;
        let mut samples = samples::samples(self, run.time_kind)?;
        let mut counters = counters::counters(self)?;
        let mut region = regions.next().transpose()?;
        let mut sample = samples.next_row().transpose()?;
        let mut counter = counters.next().transpose()?;
        loop {
            let tr = region.as_ref().map(|r| r.start);
            let tc = counter.as_ref().map(|c| c.timestamp);
            let sample_first = |t: i64| tr.is_none_or(|tr| t < tr) && tc.is_none_or(|tc| t <= tc);
            if sample
                .as_ref()
                .is_some_and(|(_, s)| sample_first(s.timestamp))
            {
                // The hot path: the samples before the next region or
                // counter, one after the other.
                while let Some((k, r)) = sample.take_if(|(_, r)| sample_first(r.timestamp)) {
                    sink.sample(&SampleEvent::of(samples.guid(k), &r), stacks)?;
                    sample = samples.next_row().transpose()?;
                }
            } else if let Some(r) = region.take_if(|r| tc.is_none_or(|tc| r.start <= tc)) {
                sink.region(&r)?;
                region = regions.next().transpose()?;
            } else if let Some(c) = counter.take() {
                sink.counter(&c)?;
                counter = counters.next().transpose()?;
            } else {
                return Ok(());
            }
        }
    }
}

/// Starts a reader thread of a stream.
fn spawn_reader(name: &str, f: impl FnOnce() + Send + 'static) -> crate::Result<()> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map(drop)
        .map_err(|error| DbError::Io {
            path: std::env::temp_dir(),
            error,
        })
}
