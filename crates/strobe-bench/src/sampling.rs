//! `strobe-bench sampling`: the quality figures of `strobe sample` on the
//! test programs: share accuracy against measured CPU time, unwinding
//! completeness across a library boundary and 200 frames deep, fixed cost
//! of a run (with `perf record` beside it), and database bytes per sample.
//! Prints figures; asserts nothing.

use crate::overhead::{build_programs, perf_unavailable, strobe_binary};
use anyhow::{Context, Result};
use clap::Args;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;
use strobe_db::{Profile, SampleRow};

/// Options of `strobe-bench sampling`.
#[derive(Debug, Args)]
pub struct SamplingArgs {
    /// Seconds of CPU time per thread for the accuracy run.
    #[arg(long, default_value_t = 4.0)]
    seconds: f64,
    /// The strobe binary (default: next to this benchmark).
    #[arg(long)]
    strobe: Option<PathBuf>,
}

fn databases(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for host in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        for f in std::fs::read_dir(host.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if f.path().extension().is_some_and(|e| e == "db") {
                out.push(f.path());
            }
        }
    }
    out
}

fn samples(db: &Path) -> Result<Vec<SampleRow>> {
    let p = Profile::open(&[db.display().to_string()])?;
    let v: Result<Vec<_>, _> = p.samples()?.collect();
    Ok(v?)
}

fn names(s: &SampleRow) -> Vec<String> {
    s.frames.iter().map(|f| f.display_name()).collect()
}

fn run_strobe(
    strobe: &Path,
    out: &Path,
    extra: &[&str],
    program: &[String],
) -> Result<(std::process::Output, f64)> {
    let t0 = Instant::now();
    let o = Command::new(strobe)
        .args(["sample", "--output-dir"])
        .arg(out)
        .args(extra)
        .arg("--")
        .args(program)
        .env("STROBE_TEST_TRUTH", "1")
        .stdout(Stdio::null())
        .output()
        .context("running strobe")?;
    Ok((o, t0.elapsed().as_secs_f64()))
}

/// Runs the benchmark.
pub fn run(args: &SamplingArgs) -> Result<()> {
    let dir = tempfile::tempdir()?;
    build_programs(dir.path(), &["hotspots", "deep", "spin"])?;
    let strobe = strobe_binary(args.strobe.as_deref())?;
    let bin = |n: &str| dir.path().join(n).display().to_string();
    let hotspots = |seconds: f64| {
        vec![
            bin("hotspots"),
            "0.7".into(),
            seconds.to_string(),
            "1".into(),
        ]
    };
    let accuracy = accuracy(&strobe, dir.path(), &hotspots(args.seconds))?;
    size_per_sample(
        &strobe,
        dir.path(),
        &hotspots(args.seconds / 4.0),
        &accuracy,
    )?;
    let (whole, bottom) = depth(&strobe, dir.path(), &bin("deep"))?;
    fixed_cost(&strobe, dir.path(), &bin("spin"))?;
    println!(
        "summary: worst share error {:.2} pp; reach {:.2}%; depth-200 whole {whole}/{bottom}",
        accuracy.worst_pp,
        100.0 * accuracy.reach as f64 / accuracy.samples as f64,
    );
    Ok(())
}

/// What the accuracy run found.
struct Accuracy {
    worst_pp: f64,
    reach: usize,
    samples: usize,
    db_bytes: u64,
}

/// Accuracy and completeness: two threads, 70/30 split, against the CPU
/// time the program measured itself (`truth` lines on its stderr).
fn accuracy(strobe: &Path, dir: &Path, program: &[String]) -> Result<Accuracy> {
    let out = dir.join("out-accuracy");
    let (o, _) = run_strobe(strobe, &out, &["-q"], program)?;
    let stderr = String::from_utf8_lossy(&o.stderr);
    let truth: HashMap<i64, (f64, f64)> = stderr
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.strip_prefix("truth ")?.split(' ').collect();
            Some((f[0].parse().ok()?, (f[1].parse().ok()?, f[2].parse().ok()?)))
        })
        .collect();
    let db = databases(&out).pop().context("no database")?;
    let all = samples(&db)?;
    let mut worst: f64 = 0.0;
    for (tid, (a_ns, b_ns)) in &truth {
        let mine: Vec<_> = all.iter().filter(|s| s.tid == *tid).collect();
        let a = mine.iter().filter(|s| names(s)[0] == "hot_a").count() as f64;
        let b = mine.iter().filter(|s| names(s)[0] == "hot_b").count() as f64;
        let err = (a / (a + b) - a_ns / (a_ns + b_ns)) * 100.0;
        println!("accuracy: thread {tid}: hot_a {:.2}% sampled vs {:.2}% of CPU time ({} samples): {err:+.2} pp", 100.0 * a / (a + b), 100.0 * a_ns / (a_ns + b_ns), a + b);
        worst = worst.max(err.abs());
    }
    let reach = all
        .iter()
        .filter(|s| names(s).iter().any(|n| n == "main" || n == "worker"))
        .count();
    let through_lib = all
        .iter()
        .filter(|s| names(s).iter().any(|n| n == "split_work"))
        .count();
    println!(
        "unwinding: {reach} of {} samples ({:.2}%) reach main or the thread's start routine; {through_lib} pass through libhotlib",
        all.len(),
        100.0 * reach as f64 / all.len() as f64
    );
    let bytes = std::fs::metadata(&db)?.len();
    println!("size: {bytes} bytes for {} samples = {:.1} bytes per sample (whole file, symbols included)", all.len(), bytes as f64 / all.len() as f64);
    Ok(Accuracy {
        worst_pp: worst,
        reach,
        samples: all.len(),
        db_bytes: bytes,
    })
}

/// The same program for a quarter of the time: the difference is what a
/// sample costs beyond the fixed schema.
fn size_per_sample(strobe: &Path, dir: &Path, program: &[String], long: &Accuracy) -> Result<()> {
    let short_out = dir.join("out-short");
    run_strobe(strobe, &short_out, &["-q"], program)?;
    let short_db = databases(&short_out).pop().context("no database")?;
    let short_n = samples(&short_db)?.len();
    let short_bytes = std::fs::metadata(&short_db)?.len();
    println!(
        "size: {:.1} bytes per additional sample ({short_n} samples: {short_bytes} bytes; {} samples: {} bytes)",
        (long.db_bytes as f64 - short_bytes as f64) / (long.samples as f64 - short_n as f64),
        long.samples,
        long.db_bytes
    );
    Ok(())
}

/// Recursion 200 deep: how many samples at the bottom hold every frame.
/// Returns (whole stacks, samples at the bottom).
fn depth(strobe: &Path, dir: &Path, deep: &str) -> Result<(usize, usize)> {
    let out = dir.join("out-deep");
    run_strobe(
        strobe,
        &out,
        &["-q"],
        &[deep.into(), "200".into(), "1".into()],
    )?;
    let deep = samples(&databases(&out).pop().context("no database")?)?;
    let bottom: Vec<_> = deep.iter().filter(|s| names(s)[0] == "bottom").collect();
    let whole = bottom
        .iter()
        .filter(|s| {
            names(s).iter().filter(|n| *n == "descend").count() == 201
                && names(s).iter().any(|n| n == "main")
        })
        .count();
    let max_depth = bottom.iter().map(|s| s.frames.len()).max().unwrap_or(0);
    println!(
        "depth: recursion 200: {whole} of {} samples whole (201 descend frames + main), deepest stack {max_depth} frames",
        bottom.len()
    );
    Ok((whole, bottom.len()))
}

/// Wall time of `argv`, its output discarded.
fn time(argv: &[String]) -> Result<f64> {
    let t0 = Instant::now();
    Command::new(&argv[0])
        .args(&argv[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()?;
    Ok(t0.elapsed().as_secs_f64())
}

/// The median of five runs of `argv`.
fn median_of_5(argv: &[String]) -> Result<f64> {
    let mut v = (0..5).map(|_| time(argv)).collect::<Result<Vec<_>>>()?;
    v.sort_by(f64::total_cmp);
    Ok(v[v.len() / 2])
}

/// Fixed cost: a program that exits at once, and a 2 s program, bare,
/// under `strobe sample` and (where perf works) under `perf record -g`.
fn fixed_cost(strobe: &Path, dir: &Path, spin: &str) -> Result<()> {
    let out = dir.join("out-fixed").display().to_string();
    let s = strobe.display().to_string();
    let perf_works = perf_unavailable(dir).is_none();
    let data = dir.join("perf.data").display().to_string();
    for seconds in ["0", "2"] {
        let program = [spin.to_string(), seconds.into()];
        let bare = median_of_5(&program)?;
        let sampled: Vec<String> = [
            s.clone(),
            "sample".into(),
            "--output-dir".into(),
            out.clone(),
            "--".into(),
        ]
        .into_iter()
        .chain(program.iter().cloned())
        .collect();
        let with = median_of_5(&sampled)?;
        let mut line = format!("fixed cost, {seconds} s program: bare {bare:.3} s, strobe sample (start-up, finalize, symbolize, summary) {with:.3} s: +{:.0} ms", (with - bare) * 1e3);
        if perf_works {
            let recorded: Vec<String> =
                ["perf", "record", "-q", "-F", "250", "-g", "-o", &data, "--"]
                    .into_iter()
                    .map(String::from)
                    .chain(program.iter().cloned())
                    .collect();
            let perf = median_of_5(&recorded)?;
            line.push_str(&format!(
                "; perf record -g {perf:.3} s: +{:.0} ms",
                (perf - bare) * 1e3
            ));
        }
        println!("{line}");
    }
    Ok(())
}
