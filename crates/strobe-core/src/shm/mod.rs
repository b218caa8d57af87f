//! What the profiled process and the collector share: one memory segment
//! per process ([`segment`]), its rings ([`ring`]), the records in them
//! ([`wire`]), the runtime's configuration ([`config`]) and what causal
//! profiling shares ([`causal`]).
//!
//! The producer side of everything here is usable from a signal handler
//! once the segment exists; the consumer side validates what it reads.

pub mod causal;
pub mod config;
pub mod image;
pub mod ring;
pub mod segment;
pub mod socket;
pub mod wire;
