//! `strobe-sampler`: statistical call-stack sampling inside the profiled
//! process.
//!
//! Each registered thread gets POSIX timers (`timer_create` with
//! `SIGEV_THREAD_ID`) on its CPU-time clock and/or the monotonic clock. The
//! timer's signal runs [`handler`]'s code on that thread, which unwinds the
//! interrupted stack with framehop (modules read from memory, never from
//! files) into the thread's own `mmap`'d ring. Allocator threads drain the
//! rings and hand each [`Sample`] to a [`SampleSink`], or spool them to
//! temporary files until the sampler stops.
//!
//! This crate owns timers, the handler, unwinding, rings and allocator
//! threads. It never writes databases, never symbolizes, and never
//! allocates, locks or formats inside the signal handler.

mod handler;
pub mod modules;
mod record;
pub mod ring;
mod sampler;
pub mod snapshot;
pub mod timer;
pub mod unwind;

pub use modules::ModuleInfo;
pub use record::{Sample, SampleSink};
pub use sampler::{Sampler, SamplerConfig, SamplerError, SamplerStats, TimerConfig};
pub use timer::TimerClock;

/// The modules of the current unwinder snapshot (path, load bias, address
/// ranges, build id), as a database records them for symbolization.
pub fn modules() -> Vec<ModuleInfo> {
    snapshot::current_modules()
}
