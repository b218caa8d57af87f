//! `strobe._native`: the Rust side of the Python package (python/strobe).
//!
//! Owns the module's registration only: each part lives in its own module
//! ([`read`]: profile databases into columns; [`annotate`]: regions,
//! marks and thread names through the preloaded runtime; [`cli`]: the
//! `strobe` command line for `python -m strobe`). Must never hold logic
//! the Rust crates already have: it calls them.

use pyo3::prelude::*;

mod annotate;
mod cli;
mod read;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    read::register(m)?;
    annotate::register(m)?;
    cli::register(m)?;
    Ok(())
}
