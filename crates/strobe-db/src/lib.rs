//! `strobe-db`: the profile database.
//!
//! One SQLite file per process, laid out like rocpd schema version 3 (every
//! table physically suffixed with the process uuid, unsuffixed views over
//! them, the standard rocpd data and summary views) plus `strobe_` tables
//! for modules, interned frames and call sites, counter time series and
//! settings. This crate owns the schema ([`schema`]) and is the only crate
//! that writes SQL for it: the streaming [`Writer`], the multi-file
//! [`Profile`] reader (any number of files: more than ten are read in
//! place, [`federation`]) and the one way the exporters read a profile,
//! [`Profile::visit`] with a [`visit::ProfileSink`], one process's tables
//! in storage order for columnar exports ([`process_tables`]), synthetic
//! MPI jobs for tests and benchmarks ([`synth`]), the raw-SQLite yardstick
//! the writer is measured against ([`baseline`]), the fast raw scans of
//! samples for readers on threads of their own ([`scan`]), the physical
//! [`merge`], the [`summary`] computations and the MPI ones ([`mpi`]),
//! the symbolization storage ([`symbols`]) and the causal-profiling
//! results ([`causal`]); and outputs written whole or not at all
//! ([`atomic`]). It never prints and never resolves symbols itself. See
//! `docs/schema.md`.

#![warn(missing_docs)]

pub mod atomic;
pub mod baseline;
mod bulk;
pub mod causal;
mod duration_stats;
pub mod error;
pub mod federation;
pub mod identity;
pub mod inputs;
mod lookup;
pub mod merge;
pub mod mpi;
mod parallel;
pub mod process;
pub mod process_tables;
pub mod reader;
mod region_scan;
pub mod scan;
pub mod schema;
pub mod stream;
pub mod summary;
pub mod symbols;
pub mod synth;
mod value;
pub mod visit;
pub mod writer;

pub use error::{DbError, Result};
pub use identity::{NodeInfo, ProcessUuid};
pub use lookup::ClockSyncPoint;
pub use merge::{merge, MergeProgress, MergeStats};
pub use process::ProcessInfo;
pub use reader::{
    CounterRow, Profile, RegionRow, ResolvedFrame, SampleRow, ThreadRecord, TimeBound,
};
pub use value::Value;
pub use writer::{
    AgentId, AgentInfo, AgentKind, AllocOp, Arg, CallSiteId, CausalExperiment, CausalProgress,
    ClockSync, CounterId, CounterInfo, EventId, FrameId, FrameSymbols, MemLevel, MemoryOp,
    MetricRow, ModuleId, ModuleRow, ProgressKind, Region, RegionStats, SampleKind, SampleMeta,
    StackFrame, StringId, ThreadInfo, ThreadRef, TrackId, WeightScale, Writer, WriterOptions,
    WriterTotals,
};
