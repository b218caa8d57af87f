//! `strobe collect-for PID --report-fd FD` (internal): the collector a
//! runtime starts for itself when it was preloaded without `strobe sample`
//! (a batch system that sets `LD_PRELOAD`).
//!
//! Owns that collector's sequence: resolve the settings from the
//! environment and configuration files (as `strobe sample` would, without
//! flags), create the run directory, start collecting, tell the runtime
//! the collector's address and its resolved configuration through `FD`,
//! then follow the process and everything it starts until they have all
//! ended, symbolize, and say what was written on stderr. Never runs the
//! program itself and never prints a summary table: the program's stderr
//! is the only output it shares.

use crate::sample::{collector_options, finish_collecting, runtime_config};
use crate::setting_flags::{load_settings, SettingFlags};
use anyhow::{bail, Context, Result};
use clap::Args;
use std::io::Write;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;

/// Options of `strobe collect-for`.
#[derive(Debug, Args)]
pub struct CollectForArgs {
    /// The process whose runtime started this collector.
    pid: i32,

    /// Where to write the collector's address and the runtime's
    /// configuration (one line each); closed afterwards.
    #[arg(long, value_name = "FD")]
    report_fd: i32,
}

/// Runs the collector; returns strobe's exit code.
pub fn run(args: &CollectForArgs, config: Option<&Path>) -> Result<i32> {
    if args.report_fd < 3 {
        bail!(
            "--report-fd must name a descriptor above 2 (given {})",
            args.report_fd
        );
    }
    // SAFETY: the runtime passed this descriptor for us alone.
    let report = unsafe { OwnedFd::from_raw_fd(args.report_fd) };
    let pidfd = strobe_core::pidfd::open(args.pid)
        .map_err(|e| anyhow::anyhow!("process {} is gone: {e}", args.pid))?;
    let settings = load_settings(config, &SettingFlags::default())?;
    let output_dir = crate::sample::output_dir(&settings)?;
    let run_dir = crate::sample::lazy_run_dir(output_dir, crate::run_dir::program_name(args.pid));
    let counters = crate::sample::counter_setup(&settings)?;
    let collector = strobe_collect::Collector::start(strobe_collect::Options {
        run_root: args.pid,
        ..collector_options(&settings, run_dir.clone(), false, &counters)
    })?;
    let mut to_runtime = std::fs::File::from(report);
    writeln!(
        to_runtime,
        "{}\n{}",
        collector.address(),
        runtime_config(&settings, false, &counters).encode()
    )
    .context("cannot answer the runtime")?;
    drop(to_runtime);
    strobe_core::pidfd::ended(&pidfd, -1);
    let databases = finish_collecting(collector);
    for db in databases.iter().filter(|p| p.is_file()) {
        if let Err(e) = crate::symbolize::symbolize_database(db, false) {
            say!("strobe: warning: cannot symbolize {}: {e:#}", db.display());
        }
        say!("strobe: wrote {}", db.display());
    }
    Ok(0)
}
