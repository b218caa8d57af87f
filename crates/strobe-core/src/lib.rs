//! `strobe-core`: the foundation every other strobe crate builds on.
//!
//! Owns the settings registry, clocks, thread identity, time-window
//! constraints and output path templates. It depends on no other strobe
//! crate and must never start threads, install signal handlers or touch
//! files other than the config file it is asked to read.

pub mod clock;
pub mod duration;
pub mod escape;
pub mod mpi_job;
pub mod output_path;
pub mod pidfd;
pub mod settings;
pub mod shm;
pub mod thread;
pub mod thread_data;
pub mod timewindow;
