//! `python -m strobe`: the `strobe` command line's post-processing
//! subcommands (avail, query, merge, summary, convert, symbolize) run in
//! the interpreter, by the same code as the binary (`strobe_cli::run_cli`).
//!
//! Owns the Python entry point only. Must never change the interpreter's
//! signal dispositions or exit the process: the status is returned.

use pyo3::prelude::*;

/// Runs `strobe ARGS...` (post-processing subcommands only) and returns
/// its exit status. The GIL is released meanwhile.
#[pyfunction]
fn cli_main(py: Python<'_>, args: Vec<String>) -> u8 {
    let argv: Vec<String> = std::iter::once("strobe".to_string()).chain(args).collect();
    py.detach(|| {
        let code = strobe_cli::run_cli(argv, strobe_cli::Host::Embedded);
        use std::io::Write;
        let _ = std::io::stdout().flush();
        code
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cli_main, m)?)
}
