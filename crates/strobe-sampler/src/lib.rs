//! `strobe-sampler`: statistical call-stack sampling inside the profiled
//! process.
//!
//! Each registered thread gets POSIX timers (`timer_create` with
//! `SIGEV_THREAD_ID`) on its CPU-time clock and/or the monotonic clock. The
//! timer's signal runs [`handler`]'s code on that thread, which unwinds the
//! interrupted stack with framehop (modules read from memory, never from
//! files) into the thread's sample ring in the process's shared segment
//! (`strobe_wire::segment`), as sample records (`strobe_wire::sample`).
//! The collector, in another process, drains the rings; [`drain`] does
//! the same here (tests).
//!
//! This crate owns timers, the handler, unwinding and the sampling
//! signals' dispositions ([`signals`]). It runs no thread, holds no file
//! descriptor, never writes databases, never symbolizes, and never
//! allocates, locks or formats inside the signal handler.

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
compile_error!(
    "strobe-sampler reads x86-64 Linux signal contexts (siginfo offsets, REG_RIP); \
     other targets are not supported yet"
);

pub mod drain;
mod handler;
mod sampler;
pub mod signals;
pub mod snapshot;
pub mod timer;
pub mod unwind;

pub use drain::{drain_samples, SampleSink};
pub use handler::{set_after_sample, set_before_sample, set_sample_counters, set_sample_tap};
pub use sampler::{Sampler, SamplerConfig, SamplerError, Spare, TimerConfig};
use strobe_core::modules::ModuleInfo;

/// The modules of the current unwinder snapshot (path, load bias, address
/// ranges, build id), as a database records them for symbolization.
pub fn modules() -> Vec<ModuleInfo> {
    snapshot::current_modules()
}
