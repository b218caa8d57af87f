//! `strobe-core`: the foundation every other strobe crate builds on.
//!
//! Owns the settings registry, clocks, thread identity, time-window
//! constraints and the record types shared by producers and consumers. It
//! depends on no other strobe crate and must never start threads, install
//! signal handlers or touch files other than the config file it is asked to
//! read.

pub mod clock;
