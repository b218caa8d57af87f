//! `libstrobe_runtime.so`: what `strobe sample` preloads into the program.
//!
//! Start-up happens in two stages ([`start`]): the library constructor
//! creates the process's shared segment and hands it to the collector; the
//! `__libc_start_main` wrapper starts sampling just before `main`. The
//! runtime interposes `pthread_create` (every program thread gets a slot
//! and timers), `fork`, the `exec` family, `dlclose`, the signal
//! functions for its sampling signals only, and the blocking and waking
//! calls causal profiling needs (forwarded unchanged outside causal runs).
//!
//! This crate owns wiring: producers (sampler, user API, tracing
//! notifications, from its own framework and, as a C-ABI XPTI subscriber
//! exporting `xptiTraceInit`/`xptiTraceFinish`, from the program's XPTI
//! dispatcher) to the segment's rings, and the process life cycle. It
//! only produces: after its constructor returns it holds no file
//! descriptor and runs no thread (tool plugins, opt-in, and the per-thread
//! counters of `sampling_events`, opt-in, are the exceptions: see
//! `counters.rs`), and it never links SQLite. It must never print through
//! Rust's stdio or let a panic cross into C.

mod causal;
mod causal_wrap;
mod connect;
mod counters;
mod dl;
mod dormant;
mod events;
mod interpose;
mod log;
mod metrics_abi;
mod mpi;
mod process;
mod self_start;
mod sigwrap;
mod stage2;
mod start;
mod state;
mod strings;
mod thread_slot;
mod threads;
mod tools;
mod tracing;
mod user_api;
mod xpti_subscriber;
