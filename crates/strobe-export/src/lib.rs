//! `strobe-export`: converters from strobe profile databases to the formats
//! people open in their tools.
//!
//! Each format is a pure output function over a [`strobe_db::Profile`]
//! (one or many databases opened as one, time window applied) and a
//! writer: [`perfetto::write_perfetto`] (with the streaming
//! [`perfetto::PerfettoWriter`]), [`chrome::write_chrome`],
//! [`folded::write_folded`], [`folded::write_flamegraph`],
//! [`folded::write_diff_flamegraph`], [`pprof::write_pprof`],
//! [`firefox::write_firefox`], [`csv::write_csv`] and
//! [`parquet::write_parquet`] (a directory: a Parquet dataset). Each is a
//! sink of [`strobe_db::Profile::visit`] (Parquet reads each process's
//! tables through [`strobe_db::process_tables`]) and never holds a trace
//! in memory. The crate
//! never prints and never chooses file names beyond
//! [`format::Format::extension`].

#![warn(missing_docs)]

pub mod chrome;
mod cpu_profile;
pub mod csv;
pub mod error;
pub mod firefox;
pub mod folded;
pub mod format;
mod jsonw;
pub mod parquet;
pub mod perfetto;
pub mod pprof;
mod spool;

pub use error::{ExportError, Result};
pub use format::Format;

/// The exporters' hasher for their hot maps: foldhash's fast hasher with a
/// fixed seed (keys are ids and names of the profile being read; a fixed
/// seed keeps every run's output the same).
pub(crate) type Fast = foldhash::fast::FixedState;
/// A map on [`Fast`].
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, Fast>;

/// Identity of a frame within a process: guid, module path, pc relative
/// to the module, function name (when symbolized).
pub(crate) type FrameKey = (
    String,
    Option<std::sync::Arc<str>>,
    u64,
    Option<std::sync::Arc<str>>,
);
