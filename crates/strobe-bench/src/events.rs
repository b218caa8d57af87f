//! `strobe-bench events`: the event path end to end, beside uftrace.
//!
//! tests/programs/region_stream.c makes N regions on one thread (calls of
//! `mid()` bracketed by the user API, as are the two leaf calls inside it).
//! For each N, side by side in one run: the program without strobe; under
//! `strobe sample` (the whole run until the database is complete, the
//! program's own time from its first region to its last, the database's
//! bytes per region, the peak RSS of the launcher, which is the collector);
//! and, when `uftrace` is installed, `uftrace record` of the same calls
//! built with `-pg` (whole run, own time, bytes per call). Prints a
//! Markdown table; asserts nothing.

use crate::overhead::strobe_binary;
use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// Options of `strobe-bench events`.
#[derive(Debug, Args)]
pub struct EventsArgs {
    /// Region counts to run, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "3000000,10000000")]
    regions: Vec<u64>,
    /// Runs of each configuration; the fastest whole run is reported.
    #[arg(long, default_value_t = 1)]
    rounds: u32,
    /// The strobe binary (default: next to this benchmark).
    #[arg(long)]
    strobe: Option<PathBuf>,
    /// Working directory (default: a new directory under the system's
    /// temporary directory, removed at the end).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Also run strobe with this time filter (`--trace-time-filter`, e.g.
    /// `1us`): a row of its own.
    #[arg(long)]
    time_filter: Option<String>,
}

/// One finished run.
#[derive(Clone, Copy, Default)]
struct Run {
    wall_s: f64,
    own_s: f64,
    max_rss_kib: i64,
}

/// Runs `cmd` (stdout discarded, stderr to `err`), waiting with `wait4`
/// for its resource use; fails on a non-zero exit.
fn run(mut cmd: Command, err: &Path) -> Result<Run> {
    let log = std::fs::File::create(err)?;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .env("REGION_STREAM_TIME", "1");
    let t0 = Instant::now();
    let child = cmd.spawn().with_context(|| format!("starting {cmd:?}"))?;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waiting for our own child with valid out-pointers; the Child
    // handle is never waited on (dropping it waits for nothing).
    let r = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    let wall_s = t0.elapsed().as_secs_f64();
    drop(child);
    let text = std::fs::read_to_string(err).unwrap_or_default();
    if r < 0 || !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        bail!("{cmd:?} failed (status {status:#x}): {}", text.trim());
    }
    let own_ns: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("own_ns "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(f64::NAN);
    Ok(Run {
        wall_s,
        own_s: own_ns / 1e9,
        max_rss_kib: usage.ru_maxrss,
    })
}

/// The best (shortest whole run) of `rounds` runs of `make()`.
fn best(rounds: u32, mut make: impl FnMut() -> Result<Run>) -> Result<Run> {
    let mut best: Option<Run> = None;
    for _ in 0..rounds.max(1) {
        let r = make()?;
        if best.is_none_or(|b| r.wall_s < b.wall_s) {
            best = Some(r);
        }
    }
    Ok(best.unwrap_or_default())
}

/// Bytes of every file below `dir` (and the database's path).
fn bytes_below(dir: &Path, db: &mut Option<PathBuf>) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut total = 0;
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() && !p.is_symlink() {
            total += bytes_below(&p, db);
        } else if let Ok(m) = p.symlink_metadata() {
            if p.extension().is_some_and(|x| x == "db") {
                *db = Some(p.clone());
            }
            total += m.len();
        }
    }
    total
}

/// Builds region_stream with `extra` cc arguments.
fn build(out: &Path, extra: &[&str]) -> Result<()> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let status = Command::new("cc")
        .args(["-O2", "-g", "-o"])
        .arg(out)
        .arg(repo.join("tests/programs/region_stream.c"))
        .arg(format!("-I{}", repo.join("include").display()))
        .args(extra)
        .arg("-lpthread")
        .status()
        .context("running cc")?;
    if !status.success() {
        bail!("cc region_stream.c {extra:?} failed");
    }
    Ok(())
}

/// Runs the benchmark.
pub fn run_events(args: &EventsArgs) -> Result<()> {
    let strobe = strobe_binary(args.strobe.as_deref())?;
    let temp;
    let dir = match &args.dir {
        Some(d) => {
            std::fs::create_dir_all(d)?;
            d.clone()
        }
        None => {
            temp = tempfile::tempdir()?;
            temp.path().to_path_buf()
        }
    };
    let api = dir.join("region_stream");
    let pg = dir.join("region_stream_pg");
    build(&api, &[])?;
    build(&pg, &["-pg", "-DREGION_STREAM_PLAIN"])?;
    let uftrace = Command::new("uftrace")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !uftrace {
        println!("uftrace is not installed (apt-get install uftrace): its columns are left out");
    }
    println!("| regions | plain | strobe: whole run | strobe: program's own time | strobe: ns per region (own) | strobe: bytes/region | strobe: collector peak RSS | uftrace -pg: whole run | uftrace: own time | uftrace: bytes/call | strobe / uftrace (whole run) |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let err = dir.join("stderr.txt");
    for &n in &args.regions {
        let count = n.to_string();
        let plain = best(args.rounds, || {
            let mut c = Command::new(&api);
            c.arg(&count);
            run(c, &err)
        })?;
        let out = dir.join("strobe-out");
        let under_strobe = |filter: Option<&str>| -> Result<(Run, u64)> {
            let mut db_bytes = 0;
            let r = best(args.rounds, || {
                let _ = std::fs::remove_dir_all(&out);
                let mut c = Command::new(&strobe);
                c.args(["sample", "-q", "--no-symbols", "--output-dir"])
                    .arg(&out);
                if let Some(f) = filter {
                    c.args(["--trace-time-filter", f]);
                }
                c.arg("--").arg(&api).arg(&count);
                let r = run(c, &err)?;
                let mut db = None;
                bytes_below(&out, &mut db);
                db_bytes = db
                    .and_then(|p| std::fs::metadata(p).ok())
                    .map_or(0, |m| m.len());
                Ok(r)
            })?;
            let _ = std::fs::remove_dir_all(&out);
            Ok((r, db_bytes))
        };
        let (under, db_bytes) = under_strobe(None)?;
        let filtered = args
            .time_filter
            .as_deref()
            .map(|f| under_strobe(Some(f)))
            .transpose()?;
        let traced = if uftrace {
            let data = dir.join("uftrace.data");
            let mut bytes = 0;
            let r = best(args.rounds, || {
                let _ = std::fs::remove_dir_all(&data);
                let mut c = Command::new("uftrace");
                c.args(["record", "-d"]).arg(&data).arg(&pg).arg(&count);
                let r = run(c, &err)?;
                bytes = bytes_below(&data, &mut None);
                Ok(r)
            })?;
            let _ = std::fs::remove_dir_all(&data);
            Some((r, bytes))
        } else {
            None
        };
        let per = |bytes: u64| bytes as f64 / n as f64;
        let (u_wall, u_own, u_bytes, ratio) = match traced {
            Some((r, b)) => (
                format!("{:.2} s", r.wall_s),
                format!("{:.2} s", r.own_s),
                format!("{:.1}", per(b)),
                format!("{:.1}×", under.wall_s / r.wall_s),
            ),
            None => ("—".into(), "—".into(), "—".into(), "—".into()),
        };
        println!(
            "| {n} | {:.2} s | {:.2} s | {:.2} s | {:.0} | {:.1} | {:.0} MiB | {u_wall} | {u_own} | {u_bytes} | {ratio} |",
            plain.wall_s,
            under.wall_s,
            under.own_s,
            under.own_s * 1e9 / n as f64,
            per(db_bytes),
            under.max_rss_kib as f64 / 1024.0,
        );
        if let (Some((r, bytes)), Some(f)) = (filtered, &args.time_filter) {
            println!(
                "| {n}, `--trace-time-filter {f}` | | {:.2} s | {:.2} s | {:.0} | {:.1} | {:.0} MiB | | | | {} |",
                r.wall_s,
                r.own_s,
                r.own_s * 1e9 / n as f64,
                per(bytes),
                r.max_rss_kib as f64 / 1024.0,
                traced.map_or("—".to_string(), |(t, _)| format!("{:.1}×", r.wall_s / t.wall_s)),
            );
        }
    }
    Ok(())
}
