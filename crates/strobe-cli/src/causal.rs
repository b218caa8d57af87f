//! `strobe causal -- <command> <args>`: causal profiling (Coz's virtual
//! speedups): which code, if made faster, would make the program faster.
//!
//! Owns the launcher's sequence, as seed 000 describes `rocprof-sys-causal`:
//! resolve settings and scopes (nothing runs if one is invalid), build the
//! configuration variants (runs, function-scope variants, end-to-end
//! speedups); with one variant it runs like `strobe sample`, with several it
//! starts the program once per variant (a fork and an exec with that
//! variant's environment) and waits for each. All variants write into one
//! run directory; then the report is printed (not with `-q`) and
//! `causal.svg` and `profile.coz` are written beside the databases (also
//! with `-q`). The experiments
//! themselves run in the collector (`strobe_collect::causal`) and the
//! program (the runtime's sampler).

use crate::sample::{counter_setup, lazy_run_dir, output_dir, run_program};
use crate::setting_flags::{load_settings, SettingFlags};
use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use strobe_collect::causal::{CausalOptions, Mode, Scope};
use strobe_core::settings::{Key, Settings};

/// Options of `strobe causal`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct CausalArgs {
    #[command(subcommand)]
    pub report: Option<CausalCommand>,

    /// Print nothing after the run (no report, no paths; errors still):
    /// causal.svg and profile.coz are written all the same.
    #[arg(long, short)]
    quiet: bool,

    /// Rows of the report after the run.
    #[arg(long, default_value_t = 10, value_name = "N")]
    top: usize,

    /// Run the program N times (same as --causal-iterations N).
    #[arg(short = 'n', long, value_name = "N")]
    iterations: Option<u32>,

    /// One experiment per run, spanning the whole run (same as
    /// --causal-end-to-end): each run is one speedup of the code in scope.
    #[arg(long)]
    end_to_end: bool,

    /// A function-scope variant (repeatable): the program runs once per
    /// value (times --iterations), with causal_function_scope set to it.
    #[arg(short = 'F', long = "function-variant", value_name = "REGEX")]
    function_variants: Vec<String>,

    #[command(flatten)]
    flags: SettingFlags,

    /// The program to profile and its arguments (`--` before it is
    /// optional).
    #[arg(trailing_var_arg = true, required = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

/// Subcommands of `strobe causal`.
#[derive(Debug, Subcommand)]
pub enum CausalCommand {
    /// Rank code by predicted impact from causal runs' databases; write
    /// the speedup curves (SVG) and Coz's profile.coz.
    Report(crate::causal_report::ReportArgs),
}

/// One configuration variant: a label and the settings it overrides.
#[derive(Debug, Clone, PartialEq)]
struct Variant {
    label: String,
    overrides: Vec<(&'static str, String)>,
}

/// Parses `causal_speedups`: percents and ranges `first-last:step`,
/// comma-separated, into sorted unique fractions.
fn parse_speedups(text: &str) -> Result<Vec<f64>> {
    let bad = |part: &str, why: &str| {
        anyhow::anyhow!(
            "causal_speedups: '{part}' {why}; give percents 0-100 and ranges like 0-100:5, comma-separated"
        )
    };
    let mut out: Vec<f64> = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let number = |t: &str| -> Result<f64> {
            let v: f64 = t.trim().parse().map_err(|_| bad(part, "is not a number"))?;
            if !(0.0..=100.0).contains(&v) {
                return Err(bad(part, "is outside 0-100"));
            }
            Ok(v)
        };
        match part.split_once('-') {
            Some((first, rest)) => {
                let (last, step) = rest.split_once(':').unwrap_or((rest, "5"));
                let (first, last, step) = (number(first)?, number(last)?, number(step)?);
                if step <= 0.0 || last < first {
                    return Err(bad(part, "is not an increasing range with a positive step"));
                }
                let mut v = first;
                while v <= last + 1e-9 {
                    out.push(v / 100.0);
                    v += step;
                }
            }
            None => out.push(number(part)? / 100.0),
        }
    }
    if out.is_empty() {
        bail!("causal_speedups is empty: give percents 0-100 (default 0-100:5)");
    }
    out.sort_by(f64::total_cmp);
    out.dedup_by(|a, b| (*a - *b).abs() < 1e-9);
    Ok(out)
}

/// The causal options of one variant's resolved settings.
fn causal_options(settings: &Settings, label: &str, seed: u64) -> Result<CausalOptions> {
    let scope = Scope::compile(
        settings.text(Key::CausalBinaryScope),
        settings.text(Key::CausalSourceScope),
        settings.text(Key::CausalFunctionScope),
    )
    .map_err(anyhow::Error::msg)?;
    Ok(CausalOptions {
        mode: if settings.text(Key::CausalMode) == "function" {
            Mode::Function
        } else {
            Mode::Line
        },
        scope,
        speedups: parse_speedups(settings.text(Key::CausalSpeedups))?,
        end_to_end: settings.bool(Key::CausalEndToEnd),
        variant: label.to_string(),
        period_ns: (1e9 / settings.float(Key::SamplingCputimeFreq).max(1e-3)).round() as u64,
        seed,
        fixed: settings.text(Key::CausalFixed).to_string(),
    })
}

/// The variants the settings ask for: function-scope variants × runs ×
/// (end to end) each listed speedup.
fn variants(settings: &Settings, function_variants: &[String]) -> Result<Vec<Variant>> {
    let runs = settings.int(Key::CausalIterations).max(1) as usize;
    let speedups = if settings.bool(Key::CausalEndToEnd) {
        parse_speedups(settings.text(Key::CausalSpeedups))?
            .into_iter()
            .map(Some)
            .collect()
    } else {
        vec![None]
    };
    let scopes: Vec<Option<&String>> = if function_variants.is_empty() {
        vec![None]
    } else {
        function_variants.iter().map(Some).collect()
    };
    let mut out = Vec::new();
    for scope in &scopes {
        for run in 0..runs {
            for speedup in &speedups {
                let mut label = Vec::new();
                let mut overrides = Vec::new();
                if let Some(scope) = scope {
                    label.push(format!("function ~ {scope}"));
                    overrides.push(("causal_function_scope", scope.to_string()));
                }
                if runs > 1 {
                    label.push(format!("run {}", run + 1));
                }
                if let Some(s) = speedup {
                    label.push(format!("speedup {:.0}%", s * 100.0));
                    overrides.push(("causal_speedups", format!("{}", s * 100.0)));
                }
                out.push(Variant {
                    label: label.join(", "),
                    overrides,
                });
            }
        }
    }
    Ok(out)
}

/// Refuses settings under which no experiment can run.
fn check_sampling(settings: &Settings) -> Result<()> {
    if !settings.bool(Key::UseSampling) || !settings.bool(Key::SamplingCputime) {
        bail!(
            "causal profiling needs the CPU-time sampler: use_sampling and sampling_cputime must be true"
        );
    }
    if settings.text(Key::Sampler) == "kernel" {
        bail!(
            "causal profiling needs the in-program sampler (it pauses threads from its signal handler): set sampler to auto or signal, not kernel"
        );
    }
    Ok(())
}

/// Runs `strobe causal`; returns strobe's exit code.
pub fn run(args: &CausalArgs, config: Option<&Path>) -> Result<i32> {
    if let Some(CausalCommand::Report(report)) = &args.report {
        return crate::causal_report::run(report).map(|()| 0);
    }
    let mut flags = args.flags.clone();
    if let Some(n) = args.iterations {
        flags.given.push(("causal_iterations", n.to_string()));
    }
    if args.end_to_end {
        flags.given.push(("causal_end_to_end", "true".into()));
    }
    // The real-time sampler would interrupt sleeping threads: CPU time only.
    flags.given.push(("sampling_realtime", "false".into()));
    let settings = load_settings(config, &flags)?;
    check_sampling(&settings)?;
    let counters = counter_setup(&settings)?;
    let seed = match settings.int(Key::CausalSeed) as u64 {
        0 => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
        s => s,
    };
    // Every variant's settings are checked before anything runs.
    let mut planned = Vec::new();
    for variant in variants(&settings, &args.function_variants)? {
        let mut flags = flags.clone();
        flags.given.extend(variant.overrides.iter().cloned());
        let settings = load_settings(config, &flags)?;
        let options = causal_options(&settings, &variant.label, seed)?;
        planned.push((variant, settings, options));
    }
    let run_dir = lazy_run_dir(
        output_dir(&settings)?,
        args.command[0].to_string_lossy().into_owned(),
    );
    let mut exit_code = 0;
    let mut databases: Vec<PathBuf> = Vec::new();
    let count = planned.len();
    for (i, (variant, settings, options)) in planned.into_iter().enumerate() {
        if count > 1 && !args.quiet {
            eprintln!(
                "strobe: causal variant {}/{count}: {}",
                i + 1,
                variant.label
            );
        }
        let options = CausalOptions {
            seed: options.seed.wrapping_add(i as u64),
            ..options
        };
        let ran = run_program(
            &args.command,
            &settings,
            &counters,
            run_dir.clone(),
            Some(options),
        )?;
        databases.extend(ran.databases);
        if exit_code == 0 {
            exit_code = ran.exit_code;
        }
        if crate::launch::interrupted() {
            break;
        }
    }
    databases.sort();
    databases.dedup();
    let Some(dir) = run_dir.created() else {
        eprintln!("strobe: no process recorded anything: no database was written");
        return Ok(exit_code);
    };
    if !args.quiet {
        for db in &databases {
            say!("strobe: wrote {}", db.display());
        }
    }
    // Quiet prints nothing, and still writes the report's files.
    let report = crate::causal_report::ReportArgs {
        inputs: vec![dir.display().to_string()],
        progress: None,
        top: args.top,
        csv: false,
        svg: None,
        coz: None,
        no_files: false,
        quiet: args.quiet,
    };
    if let Err(e) = crate::causal_report::run_to(&report, &mut std::io::stderr().lock()) {
        say!("strobe: error: {e:#}");
        if exit_code == 0 {
            return Ok(1);
        }
    }
    Ok(exit_code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speedups_take_lists_and_ranges() {
        let s = parse_speedups("0-100:25, 10,10").unwrap();
        assert_eq!(s, vec![0.0, 0.1, 0.25, 0.5, 0.75, 1.0]);
        assert_eq!(parse_speedups("0-100:5").unwrap().len(), 21);
        for bad in ["", "fast", "120", "50-10:5", "0-100:0"] {
            let e = parse_speedups(bad).unwrap_err().to_string();
            assert!(e.contains("causal_speedups"), "{bad}: {e}");
        }
    }
}
