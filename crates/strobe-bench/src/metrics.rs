//! `strobe-bench metrics`: strobe-metrics' goals, side by side with the
//! tools people compare it to, in one run.
//!
//! Owns three measurements: `strobe stat` against `perf stat` on the same
//! program (tests/programs/touch_pages.c: a known number of pages touched,
//! a known CPU time burnt), in interleaved rounds; the cost of one read of
//! a group of three software counters against PAPI's `PAPI_read` of the
//! same events (tests/programs/papi_read.c, built when libpapi is
//! installed); and derived-metric evaluation throughput. Prints figures,
//! never asserts them; a yardstick that cannot run here is skipped with the
//! reason printed.

use crate::overhead::build_programs;
use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;
use strobe_metrics::catalog;
use strobe_metrics::counting::{Counters, OpenOptions, Reading, Target};
use strobe_metrics::defs::MetricSet;

/// Options of `strobe-bench metrics`.
#[derive(Debug, Args)]
pub struct MetricsArgs {
    /// Interleaved rounds of `perf stat` and `strobe stat`; medians are reported.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Pages the measured program touches.
    #[arg(long, default_value_t = 20_000)]
    pages: u64,
    /// CPU milliseconds the measured program burns.
    #[arg(long, default_value_t = 500)]
    ms: u64,
    /// Reads timed for the read-cost comparison.
    #[arg(long, default_value_t = 200_000)]
    reads: u64,
    /// The strobe binary (default: next to this benchmark).
    #[arg(long)]
    strobe: Option<PathBuf>,
}

const EVENTS: &str = "task-clock,page-faults,context-switches";
const PAPI_EVENTS: [&str; 3] = [
    "perf::TASK-CLOCK",
    "perf::PAGE-FAULTS",
    "perf::CONTEXT-SWITCHES",
];

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `value,unit,event,...` lines (both tools' CSV): task-clock (ms) and
/// page-faults.
fn parse_csv(text: &str) -> Option<(f64, f64)> {
    let get = |event: &str| {
        text.lines().find_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f.len() > 2 && f[2] == event)
                .then(|| f[0].parse::<f64>().ok())
                .flatten()
        })
    };
    Some((get("task-clock")?, get("page-faults")?))
}

/// Runs `argv` with its report written to `report`; (task-clock ms,
/// page-faults, the program's own CPU ms).
fn counted(argv: &[String], report: &Path) -> Result<(f64, f64, f64)> {
    // Both tools write the same file: never read the other one's report.
    match std::fs::remove_file(report) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
        _ => {}
    }
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .output()
        .with_context(|| format!("running {}", argv[0]))?;
    if !out.status.success() {
        bail!(
            "{} failed: {}",
            argv.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = std::fs::read_to_string(report)?;
    let (clock, faults) = parse_csv(&text).with_context(|| format!("no counts in {text}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let own: f64 = stdout
        .split_whitespace()
        .find_map(|w| w.strip_prefix("cpu_ns="))
        .and_then(|v| v.parse().ok())
        .context("the program's cpu_ns")?;
    Ok((clock, faults, own / 1e6))
}

/// `strobe stat` and `perf stat` on touch_pages, interleaved.
fn stat_vs_perf(args: &MetricsArgs, dir: &Path) -> Result<()> {
    build_programs(dir, &["touch_pages"])?;
    let program = dir.join("touch_pages").display().to_string();
    let strobe = match &args.strobe {
        Some(p) => p.clone(),
        None => std::env::current_exe()?.with_file_name("strobe"),
    };
    let report = dir.join("report.csv");
    let report_s = report.display().to_string();
    let workload = [program, args.pages.to_string(), args.ms.to_string()];
    let mut perf: Vec<String> = ["perf", "stat", "-x,", "-o", &report_s, "-e", EVENTS, "--"]
        .map(String::from)
        .to_vec();
    perf.extend(workload.iter().cloned());
    let mut ours: Vec<String> = vec![strobe.display().to_string()];
    ours.extend(
        [
            "stat", "--format", "csv", "-o", &report_s, "-e", EVENTS, "--",
        ]
        .map(String::from),
    );
    ours.extend(workload.iter().cloned());
    let perf_works = counted(&perf, &report).map_err(|e| e.to_string());
    if let Err(why) = &perf_works {
        println!("perf stat skipped: {why}");
    }
    let (mut pc, mut pf, mut sc, mut sf, mut own_p, mut own_s) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for round in 0..args.rounds {
        if perf_works.is_ok() {
            let (c, f, own) = counted(&perf, &report)?;
            println!("round {round}: perf stat   task-clock {c:9.2} ms (program's own {own:9.2} ms), page-faults {f:.0}");
            pc.push(c);
            pf.push(f);
            own_p.push(own);
        }
        let (c, f, own) = counted(&ours, &report)?;
        println!("round {round}: strobe stat task-clock {c:9.2} ms (program's own {own:9.2} ms), page-faults {f:.0}");
        sc.push(c);
        sf.push(f);
        own_s.push(own);
    }
    let (sc, sf, own_s) = (median(&mut sc), median(&mut sf), median(&mut own_s));
    println!(
        "strobe stat: task-clock {sc:.2} ms = {:+.2}% of the program's own CPU time; page-faults {sf:.0} for {} pages touched",
        100.0 * (sc / own_s - 1.0),
        args.pages
    );
    if !pc.is_empty() {
        let (pc, pf, own_p) = (median(&mut pc), median(&mut pf), median(&mut own_p));
        println!(
            "perf stat:   task-clock {pc:.2} ms = {:+.2}% of the program's own CPU time; page-faults {pf:.0}",
            100.0 * (pc / own_p - 1.0)
        );
        println!(
            "strobe vs perf (medians): task-clock {:+.2}%, page-faults {:+.0}",
            100.0 * (sc / pc - 1.0),
            sf - pf
        );
    }
    Ok(())
}

/// ns per read of a three-counter software group on this thread.
fn strobe_read_cost(reads: u64) -> Result<f64> {
    let specs = catalog::resolve_list(EVENTS)?;
    let mut counters = Counters::open(&specs, Target::Thread(0), &OpenOptions::default())?;
    counters.enable()?;
    let mut out = vec![Reading::default(); specs.len()];
    for _ in 0..reads / 10 {
        counters.read_into(&mut out)?;
    }
    let t0 = Instant::now();
    for _ in 0..reads {
        counters.read_into(&mut out)?;
    }
    Ok(t0.elapsed().as_nanos() as f64 / reads as f64)
}

/// ns per `PAPI_read` of the same events, or why it cannot be measured.
fn papi_read_cost(reads: u64, dir: &Path) -> std::result::Result<f64, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/programs/papi_read.c");
    let exe = dir.join("papi_read");
    let built = Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg("-lpapi")
        .output()
        .map_err(|e| format!("cc: {e}"))?;
    if !built.status.success() {
        return Err(format!(
            "cannot build against libpapi (apt-get install libpapi-dev): {}",
            String::from_utf8_lossy(&built.stderr)
                .lines()
                .next()
                .unwrap_or("")
        ));
    }
    let out = Command::new(&exe)
        .arg(reads.to_string())
        .args(PAPI_EVENTS)
        .output()
        .map_err(|e| e.to_string())?;
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .strip_prefix("ns_per_read=")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| String::from_utf8_lossy(&out.stderr).trim().to_string())
}

/// Metric values per second: every built-in metric evaluated over
/// changing counter values.
fn evaluation_rate() -> Result<(f64, usize)> {
    let set = MetricSet::builtin();
    let names: Vec<String> = set.metrics().map(|m| m.name.clone()).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let plan = set.plan(&refs)?;
    let mut inputs: Vec<Option<f64>> = (0..plan.counters().len())
        .map(|i| Some(1e6 + i as f64))
        .collect();
    let mut out = vec![None; plan.outputs().len()];
    let rounds = 2_000_000usize;
    let mut sink = 0.0;
    let t0 = Instant::now();
    let n = inputs.len();
    for r in 0..rounds {
        inputs[r % n] = Some(r as f64);
        plan.evaluate(&inputs, &mut out);
        sink += out[0].unwrap_or(0.0);
    }
    let secs = t0.elapsed().as_secs_f64();
    std::hint::black_box(sink);
    Ok(((rounds * out.len()) as f64 / secs, out.len()))
}

/// Runs `strobe-bench metrics`.
pub fn run(args: &MetricsArgs) -> Result<()> {
    let dir = tempfile::tempdir()?;
    println!(
        "== strobe stat vs perf stat: {EVENTS} on touch_pages {} pages, {} ms CPU, {} rounds",
        args.pages, args.ms, args.rounds
    );
    stat_vs_perf(args, dir.path())?;
    println!(
        "== one read of {EVENTS} (this thread), {} reads",
        args.reads
    );
    let ours = strobe_read_cost(args.reads)?;
    println!("strobe-metrics read_into: {ours:.1} ns per read");
    match papi_read_cost(args.reads, dir.path()) {
        Ok(papi) => println!(
            "PAPI_read ({}): {papi:.1} ns per read; strobe/PAPI = {:.2}",
            PAPI_EVENTS.join(","),
            ours / papi
        ),
        Err(why) => println!("PAPI_read skipped: {why}"),
    }
    let (rate, metrics) = evaluation_rate()?;
    println!(
        "== derived metrics: {:.1} M metric values/s ({metrics} built-in metrics per evaluation)",
        rate / 1e6
    );
    Ok(())
}
