//! `libstrobe_runtime.so`: what `strobe sample` preloads into the program.
//!
//! Start-up happens in two stages ([`start`]): the library constructor only
//! reads settings; the `__libc_start_main` wrapper starts collecting just
//! before `main`. The runtime interposes `pthread_create` (every program
//! thread is registered and sampled; strobe's own threads are not), `fork`,
//! the `exec` family, `_exit` and `dlclose`, handles fatal signals, and
//! finalizes at exit.
//!
//! This crate owns wiring: producers (sampler, user API) to the recorder,
//! and the process life cycle. It must never print through Rust's stdio,
//! start threads in its constructor, or let a panic cross into C.

mod dl;
mod fatal;
mod interpose;
mod log;
mod process;
mod recorder;
mod start;
mod state;
mod threads;
mod tracing;
mod user_api;
