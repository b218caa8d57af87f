//! `strobe-bench multinode`: strobe over the output of many-rank MPI jobs.
//!
//! Owns the `multinode` subcommand. Its parts (`--part`) are measured one
//! after the other; each prints its own figures and none asserts a timing:
//!
//! - `scale`: post-processing over thousands of rank databases. Writes the
//!   databases of a synthetic MPI job per rank count (`--ranks`, through
//!   `strobe_db::synth`, the generator the integration tests use, on every
//!   core), then runs `strobe query`, `strobe summary`, `strobe merge` and
//!   `strobe convert` over each set as child processes and reports wall
//!   seconds, seconds per 1 000 files and the child's peak RSS (`wait4`
//!   `ru_maxrss`). See [`measure_scale`].
//!
//! - `wrappers`, `clocks`: the MPI wrappers' cost and clock alignment with
//!   real MPI jobs (see `multinode_mpi.rs`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use strobe_db::synth::JobSpec;

/// The parts of `strobe-bench multinode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Part {
    /// Post-processing (query, summary, merge, convert) over many rank databases.
    Scale,
    /// The MPI wrappers' cost per call above the bare `PMPI_` call.
    Wrappers,
    /// Clock alignment against a known skew.
    Clocks,
}

/// Arguments of `strobe-bench multinode`.
#[derive(Debug, Args)]
pub struct MultinodeArgs {
    /// What to measure (several allowed, comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "scale")]
    pub part: Vec<Part>,
    /// scale: numbers of rank databases to measure over (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1000,10000")]
    pub ranks: Vec<u32>,
    /// scale: nodes the ranks are spread over (each its own host name and machine id).
    #[arg(long, default_value_t = 64)]
    pub nodes: u32,
    /// scale: seed of the synthetic data.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// scale: fewest call-stack samples per rank.
    #[arg(long, default_value_t = 1_000)]
    pub min_samples: u32,
    /// scale: most call-stack samples per rank.
    #[arg(long, default_value_t = 5_000)]
    pub max_samples: u32,
    /// scale: where the databases and outputs go (`<dir>/<ranks>/…`); kept between runs
    /// when complete, so a second run measures without generating again.
    #[arg(long, default_value = "/tmp/strobe-multinode")]
    pub dir: PathBuf,
    /// scale: remove each set of databases after measuring it.
    #[arg(long)]
    pub clean: bool,
    /// scale: what to run over each set (comma-separated): query, summary, merge (`--per-node`),
    /// and convert-FORMAT for any `strobe convert` format (convert-pftrace, convert-folded, …;
    /// pprof holds every process's stacks, so its memory grows with the ranks).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "query,summary,merge,convert-pftrace,convert-folded"
    )]
    pub commands: Vec<String>,
    /// wrappers, clocks: runs of each measurement per MPI.
    #[arg(long, default_value_t = 5)]
    pub mpi_runs: usize,
    /// The `strobe` binary (default: the one beside this executable).
    #[arg(long)]
    pub strobe: Option<PathBuf>,
    /// scale: threads writing the databases (default: every core).
    #[arg(long)]
    pub jobs: Option<usize>,
}

/// Runs the parts asked for.
pub fn run(a: MultinodeArgs) -> anyhow::Result<()> {
    for part in &a.part {
        match part {
            Part::Scale => {
                for &n in &a.ranks {
                    measure_scale(&a, n)?;
                }
            }
            Part::Wrappers => crate::multinode_mpi::wrappers(&strobe_binary(&a)?, a.mpi_runs)?,
            Part::Clocks => crate::multinode_mpi::clocks(&strobe_binary(&a)?, a.mpi_runs)?,
        }
    }
    Ok(())
}

/// One command's cost: wall time and the child's peak RSS.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cost {
    /// Wall seconds from spawn to exit.
    pub seconds: f64,
    /// Peak resident set size of the child (KiB, `ru_maxrss`).
    pub peak_rss_kib: i64,
}

/// Runs `cmd` to completion with its output discarded (stderr kept in
/// memory for the error message) and returns its wall time and peak RSS
/// (`wait4`). A failing command is an error naming it.
pub fn measure_command(cmd: &mut Command) -> anyhow::Result<Cost> {
    let what = format!("{cmd:?}");
    let t0 = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("spawning {what}"))?;
    // Read stderr on a thread so a chatty child never blocks on a full pipe.
    let mut err_pipe = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(e) = err_pipe.as_mut() {
            use std::io::Read;
            let _ = e.read_to_string(&mut s);
        }
        s
    });
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet waited for; both pointers are valid.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    let seconds = t0.elapsed().as_secs_f64();
    if r != pid {
        bail!(
            "wait4 on {what} failed: {}",
            std::io::Error::last_os_error()
        );
    }
    let stderr = reader.join().unwrap_or_default();
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        bail!("{what} failed (wait status {status}):\n{stderr}");
    }
    Ok(Cost {
        seconds,
        peak_rss_kib: ru.ru_maxrss,
    })
}

/// The `strobe` binary to measure.
fn strobe_binary(a: &MultinodeArgs) -> anyhow::Result<PathBuf> {
    if let Some(s) = &a.strobe {
        return Ok(s.clone());
    }
    let exe = std::env::current_exe()?;
    let beside = exe.with_file_name("strobe");
    if !beside.exists() {
        bail!(
            "no strobe binary at {}: build it (cargo build --release -p strobe-cli) or pass --strobe",
            beside.display()
        );
    }
    Ok(beside)
}

/// Writes the databases of `spec` under `dir` unless a previous run left
/// them complete (a `complete` file naming the spec); returns the seconds
/// spent (0 when reused).
fn generate(dir: &Path, spec: &JobSpec, jobs: usize) -> anyhow::Result<f64> {
    let stamp = dir.join("complete");
    let want = format!("{spec:?}");
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == want) {
        println!("reusing the {} databases in {}", spec.ranks, dir.display());
        return Ok(0.0);
    }
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    let db_dir = dir.join("run");
    std::fs::create_dir_all(&db_dir)?;
    let t0 = Instant::now();
    let done = std::sync::atomic::AtomicU64::new(0);
    let every = (spec.ranks / 10).max(1) as u64;
    let totals = strobe_db::synth::write_job(&db_dir, spec, jobs, &|_| {
        let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        if n.is_multiple_of(every) {
            eprintln!("  generated {n}/{}", spec.ranks);
        }
    })?;
    let secs = t0.elapsed().as_secs_f64();
    let (samples, regions, counters) = totals.iter().fold((0, 0, 0), |acc, t| {
        (
            acc.0 + t.samples,
            acc.1 + t.regions,
            acc.2 + t.counter_samples,
        )
    });
    let bytes: u64 = totals
        .iter()
        .filter_map(|t| std::fs::metadata(&t.path).ok())
        .map(|m| m.len())
        .sum();
    println!(
        "generated {} rank databases on {} nodes in {secs:.1} s ({jobs} threads): {samples} samples, \
         {regions} regions, {counters} counter values, {:.0} MiB",
        spec.ranks,
        spec.nodes,
        bytes as f64 / 1048576.0
    );
    std::fs::write(&stamp, want)?;
    Ok(secs)
}

/// Measures every command of `a.commands` over `ranks` rank databases and
/// prints one line each: seconds, seconds per 1 000 files, peak RSS.
pub fn measure_scale(a: &MultinodeArgs, ranks: u32) -> anyhow::Result<Vec<(String, Cost)>> {
    let strobe = strobe_binary(a)?;
    let spec = JobSpec {
        ranks,
        nodes: a.nodes.min(ranks).max(1),
        seed: a.seed,
        min_samples: a.min_samples,
        max_samples: a.max_samples.max(a.min_samples),
        steps: 40,
        job: format!("bench.{ranks}"),
    };
    let dir = a.dir.join(ranks.to_string());
    let jobs = a
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    generate(&dir, &spec, jobs)?;
    let input = dir.join("run");
    let out = dir.join("out");
    let mut results = Vec::new();
    println!(
        "{:<18} {:>7} {:>10} {:>14} {:>14}",
        "command", "files", "seconds", "s/1000 files", "peak RSS MiB"
    );
    for c in &a.commands {
        let _ = std::fs::remove_dir_all(&out);
        std::fs::create_dir_all(&out)?;
        let mut cmd = Command::new(&strobe);
        match c.as_str() {
            "query" => {
                cmd.args(["query", "--format", "csv", "-i"])
                    .arg(&input)
                    .arg("select count(*) from samples");
            }
            "summary" => {
                cmd.args(["summary", "-i"]).arg(&input);
            }
            "merge" => {
                // One file per node: one merged file holds at most 256
                // processes.
                cmd.args(["merge", "--quiet", "--per-node", "-i"])
                    .arg(&input)
                    .arg("-o")
                    .arg(out.join("nodes"));
            }
            other => match other.strip_prefix("convert-") {
                Some(format) => {
                    cmd.args(["convert", "-f", format, "-o", "bench", "-i"])
                        .arg(&input)
                        .arg("-d")
                        .arg(&out);
                }
                None => bail!("unknown command {other}: query, summary, merge or convert-FORMAT"),
            },
        }
        let cost = measure_command(&mut cmd)?;
        println!(
            "{:<18} {:>7} {:>10.2} {:>14.2} {:>14.1}",
            c,
            ranks,
            cost.seconds,
            cost.seconds * 1000.0 / f64::from(ranks.max(1)),
            cost.peak_rss_kib as f64 / 1024.0
        );
        results.push((c.clone(), cost));
    }
    let _ = std::fs::remove_dir_all(&out);
    if a.clean {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    Ok(results)
}
