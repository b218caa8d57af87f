//! `strobe-bench causal`: how well `strobe causal` predicts the effect of
//! an optimisation, against programs where the real effect is known, side
//! by side with Coz on the same binaries.
//!
//! Owns the accuracy benchmark of causal profiling. The ground truth comes
//! from three programs in `tests/programs/` (`causal_serial.c`,
//! `causal_threads.c`, `causal_pool.c`) whose function under test does s%
//! less work when built with `-DSPEEDUP=s`: the real program speedup at s
//! is measured from wall times of the two builds, then compared with what
//! `strobe causal` and Coz predict from a run of the unmodified build. The
//! loop under test is marked `/* causal-truth */` in each source; a
//! profiler's selection is "the function under test" when it names that
//! function or one of those lines.
//!
//! Coz's prediction is computed from `profile.coz` with the method of Coz's
//! own viewer (see [`CozProfile`]). Prints figures and never asserts them;
//! a tool that fails is reported, with its output, and the others go on.

mod coz;
mod strobe;

use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use coz::{coz_result, run_coz, CozResult};
use strobe::{run_strobe, strobe_result, StrobeResult};

/// Options of `strobe-bench causal`.
#[derive(Debug, Args)]
pub struct CausalArgs {
    /// The strobe binary (default: next to this benchmark).
    #[arg(long)]
    strobe: Option<PathBuf>,
    /// Directory holding causal_serial.c, causal_threads.c and causal_pool.c.
    #[arg(long)]
    programs: Option<PathBuf>,
    /// Length of each profiled run, and of the plain run its overhead is
    /// measured against, in milliseconds of work: that many iterations of
    /// causal_serial and items of causal_pool (about 1 ms each), a tenth as
    /// many iterations of causal_threads (about 10 ms each).
    #[arg(long, default_value_t = 60_000)]
    iterations: u64,
    /// Length of each timed run that measures the real speedup, in the
    /// units of --iterations.
    #[arg(long, default_value_t = 5_000)]
    real_iterations: u64,
    /// Timed runs of each build for the real speedup (interleaved); the
    /// median is used.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Speedups of the function under test to evaluate, in percent.
    #[arg(long, value_delimiter = ',', default_value = "10,20,30,40,50")]
    speedups: Vec<u32>,
    /// Only these programs (serial, threads, pool; comma separated).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Do not run Coz.
    #[arg(long)]
    skip_coz: bool,
    /// Do not run `strobe causal` (real speedups and Coz only).
    #[arg(long)]
    skip_strobe: bool,
    /// An extra argument for `strobe causal`, placed before `--` (repeatable).
    #[arg(long = "strobe-arg", allow_hyphen_values = true)]
    strobe_args: Vec<String>,
    /// Work in this directory and keep it (builds, strobe's output,
    /// profile.coz and both tools' logs) instead of a temporary one.
    #[arg(long)]
    keep: Option<PathBuf>,
}

/// A ground-truth program: its source stem, the function under test, the
/// name of its progress point and how long one iteration takes.
struct Program {
    stem: &'static str,
    short: &'static str,
    function: &'static str,
    progress: &'static str,
    /// Milliseconds of wall time per iteration (argv[1] counts iterations).
    ms_per_iteration: u64,
    about: &'static str,
}

const PROGRAMS: [Program; 3] = [
    Program {
        stem: "causal_serial",
        short: "serial",
        function: "hot",
        progress: "iteration",
        ms_per_iteration: 1,
        about: "one thread; hot() is 60% of the run (real speedup 0.6·s)",
    },
    Program {
        stem: "causal_threads",
        short: "threads",
        function: "long_side",
        progress: "iteration",
        ms_per_iteration: 10,
        about: "two threads joined per iteration, 60/40; real speedup saturates near s = 33%",
    },
    Program {
        stem: "causal_pool",
        short: "pool",
        function: "locked_update",
        progress: "item",
        ms_per_iteration: 1,
        about: "four workers on one lock (70% of the work inside it); real speedup ≈ s",
    },
];

/// Coz's viewer lists a selection only when one of its progress points has
/// at least this many distinct speedups measured (the viewer's default).
const COZ_MIN_POINTS: usize = 10;

/// A speedup curve: (line speedup, program speedup) as fractions, sorted by
/// line speedup.
type Curve = Vec<(f64, f64)>;

/// The program speedup at line speedup `x`: the curve's value there, or a
/// linear interpolation between the measured speedups around it; `None`
/// outside the measured range.
fn interpolate(curve: &[(f64, f64)], x: f64) -> Option<f64> {
    const EPS: f64 = 1e-9;
    if let Some(&(_, y)) = curve.iter().find(|(cx, _)| (cx - x).abs() < EPS) {
        return Some(y);
    }
    let below = curve.iter().rfind(|(cx, _)| *cx < x)?;
    let above = curve.iter().find(|(cx, _)| *cx > x)?;
    let t = (x - below.0) / (above.0 - below.0);
    Some(below.1 + t * (above.1 - below.1))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The line numbers (1-based) of `source` marked `/* causal-truth */`.
fn truth_lines(source: &str) -> Vec<u32> {
    source
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains("/* causal-truth */"))
        .map(|(i, _)| i as u32 + 1)
        .collect()
}

/// Whether a profiler's selection (`file:line`, or a function name) is
/// inside the function under test: one of the marked `lines` of the file
/// named `file_name`, or the function itself (a compiler clone such as
/// `hot.constprop.0` counts as the function).
fn selection_is_truth(selection: &str, file_name: &str, function: &str, lines: &[u32]) -> bool {
    let selection = selection.trim();
    if let Some((file, line)) = selection.rsplit_once(':') {
        if let Ok(line) = line.trim().parse::<u32>() {
            let base = Path::new(file.trim())
                .file_name()
                .and_then(|f| f.to_str())
                .unwrap_or("");
            return base == file_name && lines.contains(&line);
        }
    }
    let name = selection.split('(').next().unwrap_or("").trim();
    let name = name.split('.').next().unwrap_or("");
    name == function
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Builds `source` at `-DSPEEDUP=speedup` into `out` with gcc, with debug
/// information Coz 0.2.2 can read (DWARF 3) and Coz's progress point.
fn build(source: &Path, include: &Path, out: &Path, speedup: u32) -> Result<()> {
    let output = Command::new("gcc")
        .args(["-O2", "-g", "-gdwarf-3", "-pthread", "-DWITH_COZ"])
        .arg(format!("-DSPEEDUP={speedup}"))
        .arg("-I")
        .arg(include)
        .arg("-o")
        .arg(out)
        .arg(source)
        .arg("-ldl")
        .output()
        .context("running gcc")?;
    if !output.status.success() {
        bail!(
            "gcc could not build {} (SPEEDUP={speedup}):\n{}",
            source.display(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

/// Wall seconds of one plain run of `prog iterations`.
fn time_run(prog: &Path, iterations: u64) -> Result<f64> {
    let t0 = Instant::now();
    let status = Command::new(prog)
        .arg(iterations.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .with_context(|| format!("running {}", prog.display()))?;
    let wall = t0.elapsed().as_secs_f64();
    if !status.success() {
        bail!("{} {iterations} failed: {status}", prog.display());
    }
    Ok(wall)
}

/// Wall times of `runs` interleaved rounds over all the builds: one list
/// of seconds per build.
fn time_builds(builds: &[(u32, PathBuf)], iterations: u64, runs: usize) -> Result<Vec<Vec<f64>>> {
    let mut times = vec![Vec::new(); builds.len()];
    for round in 0..runs {
        eprintln!("  timing round {}/{runs}", round + 1);
        for (i, (_, prog)) in builds.iter().enumerate() {
            times[i].push(time_run(prog, iterations)?);
        }
    }
    Ok(times)
}

/// Real program speedups (fractions) of builds 1.. over build 0, from the
/// median wall times, and from the fastest run of each build (other work
/// on the machine only ever slows a run down, so on a shared machine the
/// fastest runs are the better estimate).
fn real_speedups(times: &[Vec<f64>]) -> Vec<(f64, f64)> {
    let medians: Vec<f64> = times.iter().map(|t| median(t.clone())).collect();
    let fastest: Vec<f64> = times
        .iter()
        .map(|t| t.iter().copied().fold(f64::INFINITY, f64::min))
        .collect();
    (1..times.len())
        .map(|i| {
            (
                (medians[0] - medians[i]) / medians[0],
                (fastest[0] - fastest[i]) / fastest[0],
            )
        })
        .collect()
}

/// The one-minute load average (other work on this machine skews the
/// wall times, most of all those of the threaded programs).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

fn pct(v: Option<f64>) -> String {
    v.map(|v| format!("{:.1}%", v * 100.0))
        .unwrap_or_else(|| "n/a".into())
}

fn err_pp(pred: Option<f64>, real: f64) -> String {
    pred.map(|p| format!("{:.1}", (p - real).abs() * 100.0))
        .unwrap_or_else(|| "n/a".into())
}

/// Runs the benchmark and prints one table per program.
pub fn run(args: &CausalArgs) -> Result<()> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let programs_dir = args
        .programs
        .clone()
        .unwrap_or_else(|| repo.join("tests/programs"));
    let programs_dir = programs_dir
        .canonicalize()
        .with_context(|| format!("--programs {}", programs_dir.display()))?;
    // The headers of the checkout the programs come from, else this one's.
    let include = [programs_dir.join("../../include"), repo.join("include")]
        .into_iter()
        .find(|d| d.join("strobe.h").is_file())
        .unwrap_or_else(|| repo.join("include"));
    let strobe = if args.skip_strobe {
        None
    } else {
        // Absolute: strobe runs in a scratch directory.
        Some(crate::overhead::strobe_binary(args.strobe.as_deref())?.canonicalize()?)
    };
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
    if let Some(bad) = args.speedups.iter().find(|s| **s == 0 || **s > 100) {
        bail!("--speedups takes percents from 1 to 100, not {bad}");
    }
    for name in &args.only {
        if !PROGRAMS.iter().any(|p| p.short == name || p.stem == name) {
            bail!("--only: no program `{name}` (serial, threads, pool)");
        }
    }
    let temp = tempfile::tempdir()?;
    let dir = match &args.keep {
        Some(d) => {
            std::fs::create_dir_all(d)?;
            d.canonicalize()?
        }
        None => temp.path().to_path_buf(),
    };
    println!(
        "causal accuracy: profiled runs of {} ms of work, real speedups from the median of {} interleaved runs of {} ms of work per build",
        args.iterations, args.runs, args.real_iterations
    );
    let mut failures = Vec::new();
    for p in PROGRAMS
        .iter()
        .filter(|p| args.only.is_empty() || args.only.iter().any(|o| o == p.short || o == p.stem))
    {
        let load_before = load_average();
        let source = programs_dir.join(format!("{}.c", p.stem));
        let text = std::fs::read_to_string(&source)
            .with_context(|| format!("reading {}", source.display()))?;
        let lines = truth_lines(&text);
        if lines.is_empty() {
            bail!("{} marks no line `/* causal-truth */`", source.display());
        }
        let work = dir.join(p.stem);
        std::fs::create_dir_all(&work)?;
        eprintln!("{}: building", p.stem);
        let mut builds = Vec::new();
        for s in std::iter::once(0).chain(args.speedups.iter().copied()) {
            let out = work.join(format!("{}_s{s}", p.stem));
            build(&source, &include, &out, s)?;
            builds.push((s, out));
        }
        let prog = builds[0].1.clone();
        let iterations = (args.iterations / p.ms_per_iteration).max(1);
        let real_iterations = (args.real_iterations / p.ms_per_iteration).max(1);
        eprintln!("{}: measuring real speedups", p.stem);
        let times = time_builds(&builds, real_iterations, args.runs)?;
        let real = real_speedups(&times);
        eprintln!("{}: plain run of {iterations} iterations", p.stem);
        let plain = time_run(&prog, iterations)?;

        let strobe_res = match &strobe {
            None => None,
            Some(strobe) => {
                eprintln!("{}: strobe causal", p.stem);
                let sw = work.join("strobe");
                std::fs::create_dir_all(&sw)?;
                match run_strobe(strobe, &args.strobe_args, &sw, &prog, iterations) {
                    Ok((rows, wall)) => Some(Ok(strobe_result(&rows, p, &lines, wall))),
                    Err(e) => {
                        failures.push(format!("{}: strobe", p.stem));
                        Some(Err(e))
                    }
                }
            }
        };
        let coz_res = if args.skip_coz {
            None
        } else {
            eprintln!("{}: coz run", p.stem);
            let cw = work.join("coz");
            std::fs::create_dir_all(&cw)?;
            match run_coz(&cw, &prog, iterations) {
                Ok((profile, wall)) => Some(Ok(coz_result(&profile, p, &lines, wall))),
                Err(e) => {
                    failures.push(format!("{}: coz", p.stem));
                    Some(Err(e))
                }
            }
        };
        println!();
        println!("{}: {}", p.stem, p.about);
        println!(
            "  real: {real_iterations} iterations per timed run; wall s, median (min-max) per build: {}",
            builds
                .iter()
                .zip(&times)
                .map(|((s, _), t)| {
                    let lo = t.iter().copied().fold(f64::INFINITY, f64::min);
                    let hi = t.iter().copied().fold(0.0, f64::max);
                    format!("{s}%: {:.3} ({lo:.3}-{hi:.3})", median(t.clone()))
                })
                .collect::<Vec<_>>()
                .join(", ")
        );
        println!("  profiled runs: {iterations} iterations; plain run {plain:.1} s");
        println!(
            "  load average: {load_before} at the start, {} at the end ({} cores)",
            load_average(),
            std::thread::available_parallelism().map_or(0, |n| n.get())
        );
        print_program(
            p,
            &lines,
            &args.speedups,
            &real,
            plain,
            strobe_res.as_ref(),
            coz_res.as_ref(),
        );
    }
    if !failures.is_empty() {
        bail!("some profilers failed: {}", failures.join(", "));
    }
    Ok(())
}

fn print_program(
    p: &Program,
    lines: &[u32],
    speedups: &[u32],
    real: &[(f64, f64)],
    plain: f64,
    strobe: Option<&Result<StrobeResult>>,
    coz: Option<&Result<CozResult>>,
) {
    let overhead = |wall: f64| format!("{wall:.1} s ({:+.1}%)", (wall / plain - 1.0) * 100.0);
    let marked: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    println!(
        "  function under test {}(), lines {}.c:{}; progress point \"{}\"",
        p.function,
        p.stem,
        marked.join(","),
        p.progress
    );
    let strobe_ok = match strobe {
        None => {
            println!("  strobe: skipped (--skip-strobe)");
            None
        }
        Some(Err(e)) => {
            println!("  strobe: FAILED: {e:#}");
            None
        }
        Some(Ok(r)) => {
            println!("  strobe causal: {}", overhead(r.wall_s));
            println!(
                "  strobe top-ranked: {}",
                r.top.as_deref().unwrap_or("(empty report)")
            );
            match &r.truth {
                Some((sel, e, _)) => {
                    println!("  strobe on the function under test: {sel} ({e} experiments)")
                }
                None => println!("  strobe on the function under test: no row"),
            }
            Some(r)
        }
    };
    let coz_ok = match coz {
        None => {
            println!("  coz: skipped (--skip-coz)");
            None
        }
        Some(Err(e)) => {
            println!("  coz: FAILED: {e:#}");
            None
        }
        Some(Ok(r)) => {
            println!("  coz run: {}", overhead(r.wall_s));
            match &r.top {
                Some((sel, true)) => println!("  coz top-ranked (viewer's impact order): {sel}"),
                Some((sel, false)) => println!(
                    "  coz top-ranked (viewer's impact order): {sel} (no location has {COZ_MIN_POINTS} speedups, the viewer's minimum)"
                ),
                None => println!("  coz top-ranked: (no experiment with a baseline)"),
            }
            match &r.truth {
                Some((sel, e, points, _)) => println!(
                    "  coz on the function under test: {sel} ({e} experiments, {} speedups with data)",
                    points.len()
                ),
                None => println!("  coz on the function under test: never selected"),
            }
            Some(r)
        }
    };
    println!(
        "  {:>5} {:>7} {:>9} {:>8} {:>17} {:>6} {:>8} {:>6} {:>10}",
        "s", "real", "real min", "strobe", "strobe 95% CI", "|err|", "coz", "|err|", "coz points"
    );
    for (s, (real, real_min)) in speedups.iter().zip(real) {
        let x = *s as f64 / 100.0;
        let sp = strobe_ok.and_then(|r| r.predict(x));
        let ci = sp
            .and_then(|(_, ci)| ci)
            .map(|(l, h)| format!("[{:.1}, {:.1}]", l * 100.0, h * 100.0))
            .unwrap_or_else(|| "-".into());
        let sp = sp.map(|(y, _)| y);
        let (cc, cp) = coz_ok
            .and_then(|r| r.truth.as_ref())
            .map(|(_, _, points, curve)| (interpolate(curve, x), interpolate(points, x)))
            .unwrap_or((None, None));
        println!(
            "  {:>4}% {:>7} {:>9} {:>8} {:>17} {:>6} {:>8} {:>6} {:>10}",
            s,
            pct(Some(*real)),
            pct(Some(*real_min)),
            pct(sp),
            ci,
            err_pp(sp, *real),
            pct(cc),
            err_pp(cc, *real),
            pct(cp)
        );
    }
    println!(
        "  (real: from median wall times, |err| against it, in percentage points; real min: from each build's fastest run; coz = the viewer's drawn curve, coz points = its measured points, interpolated)"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolates_between_measured_speedups() {
        let c = vec![(0.0, 0.0), (0.1, 0.05), (0.3, 0.25)];
        assert_eq!(interpolate(&c, 0.1), Some(0.05));
        assert!((interpolate(&c, 0.2).unwrap() - 0.15).abs() < 1e-12);
        assert_eq!(interpolate(&c, 0.5), None);
    }

    #[test]
    fn finds_marked_lines_and_matches_selections() {
        let src = "int a;\nvoid hot(void) {\n  for (;;) x++; /* causal-truth */\n}\n";
        let lines = truth_lines(src);
        assert_eq!(lines, vec![3]);
        assert!(selection_is_truth(
            "/src/t/causal_serial.c:3",
            "causal_serial.c",
            "hot",
            &lines
        ));
        assert!(selection_is_truth(
            "causal_serial.c:3",
            "causal_serial.c",
            "hot",
            &lines
        ));
        assert!(!selection_is_truth(
            "/x/causal_serial.c:4",
            "causal_serial.c",
            "hot",
            &lines
        ));
        assert!(!selection_is_truth(
            "/x/other.c:3",
            "causal_serial.c",
            "hot",
            &lines
        ));
        assert!(selection_is_truth("hot", "causal_serial.c", "hot", &lines));
        assert!(selection_is_truth(
            "hot.constprop.0",
            "causal_serial.c",
            "hot",
            &lines
        ));
        assert!(!selection_is_truth(
            "hotter",
            "causal_serial.c",
            "hot",
            &lines
        ));
    }
}
