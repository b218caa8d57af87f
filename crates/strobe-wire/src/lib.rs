//! `strobe-wire`: the contract between what runs inside the profiled
//! program (`strobe-runtime` and the crates it is built on) and what runs
//! outside it (the collector, `strobe-collect`, and the launcher).
//!
//! Both sides depend on this crate and on nothing of each other. It holds
//! what they must agree on, byte for byte:
//!
//! - [`segment`]: the shared-memory segment of one process (header, thread
//!   slots, rings), its creation, sharing, mapping and validation;
//! - [`ring`]: the single-producer, single-consumer record ring and its
//!   framing;
//! - [`sample`]: the sample record and the one decoded [`sample::Sample`];
//! - [`record`]: the event records, their bodies, counter readings and the
//!   process information in the segment's header;
//! - [`trace_point`]: the trace-point type codes event records carry;
//! - [`causal`]: the area causal profiling shares;
//! - [`config`]: the runtime's configuration, carried in the environment;
//! - [`socket`]: the address of the collector's socket.
//!
//! It is a leaf: it depends on no other strobe crate, and must never grow
//! one (`libc` is its only dependency). It runs no thread, keeps no global
//! state and never does I/O beyond the segment's own `memfd` and mappings.
//! The producer side of everything here is usable from a signal handler
//! once the segment exists (no allocation, no lock, no formatting); the
//! consumer side validates what it reads, since the program may write
//! anything into the segment.

pub mod causal;
pub mod config;
pub mod record;
pub mod ring;
pub mod sample;
pub mod segment;
pub mod socket;
pub mod trace_point;
