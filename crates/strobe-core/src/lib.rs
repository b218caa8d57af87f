//! `strobe-core`: the foundation every other strobe crate builds on.
//!
//! Owns the settings registry, clocks, thread identity, time-window
//! constraints, output path templates, the modules loaded in this process
//! ([`modules`]) and what can be seen of an executable before it runs
//! ([`image`]). Of the other strobe crates it depends only on
//! `strobe-wire`, the runtime/collector contract (a leaf). It must never
//! start threads, install signal handlers or touch files other than the
//! config file it is asked to read and the executables it is asked about.

pub mod clock;
pub mod duration;
pub mod escape;
pub mod image;
pub mod modules;
pub mod mpi_job;
pub mod output_path;
pub mod pidfd;
pub mod settings;
pub mod thread;
pub mod thread_data;
pub mod timewindow;
