//! Counters and derived metrics (seed 003, CPU side).
//!
//! Owns what can be counted on this machine (the catalog: perf events,
//! rusage, procfs and sysfs values), how counters are opened in groups
//! the PMU can schedule together, started, stopped and read (with the
//! enabled/running times that scale multiplexed counts), the metric
//! definition files (TOML and the seed's XML), and the derived-metric
//! expressions evaluated over counter values. Never writes a database or
//! prints: the CLI, the collector and the C ABI present what it returns.

pub mod capi;
pub mod catalog;
pub mod counting;
pub mod defs;
pub mod expr;
