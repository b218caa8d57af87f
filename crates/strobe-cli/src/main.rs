//! `strobe`: the command line's binary; everything is in the library
//! ([`strobe_cli::run_cli`]).

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(strobe_cli::run_cli(
        std::env::args_os(),
        strobe_cli::Host::Binary,
    ))
}
