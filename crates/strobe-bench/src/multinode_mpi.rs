//! `strobe-bench multinode --part wrappers,clocks`: what the MPI wrappers
//! cost and how well they align clocks, with the MPI implementations on
//! this machine (Debian's Open MPI and MPICH).
//!
//! Owns these two measurements. `wrappers`: tests/programs/mpi_wrapcost.c
//! (one rank sending to itself; each block times the same calls through
//! `PMPI_` and through `MPI_`, order alternating, on the thread's CPU
//! clock) under `strobe sample`; the cost is the median difference per
//! call. `clocks`: tests/programs/mpi_pingpong.c as two ranks under
//! `strobe sample`, the second with `STROBE_MPI_CLOCK_SKEW_NS` (a known
//! offset; the truth on one machine is minus it), the offsets the ranks
//! stored compared with it. Prints figures and asserts none; an MPI that is
//! not installed is reported and skipped.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// An MPI implementation: name, launcher, C compiler wrapper, launcher
/// flags.
struct Mpi {
    name: &'static str,
    run: &'static str,
    cc: &'static str,
    flags: &'static [&'static str],
}

const MPIS: [Mpi; 2] = [
    Mpi {
        name: "Open MPI",
        run: "mpirun.openmpi",
        cc: "mpicc.openmpi",
        flags: &["--oversubscribe"],
    },
    Mpi {
        name: "MPICH",
        run: "mpirun.mpich",
        cc: "mpicc.mpich",
        flags: &[],
    },
];

/// The skew given to rank 1 in `clocks` (ns).
const SKEW_NS: i64 = 1_234_567_891;

fn programs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/programs")
}

fn build(mpi: &Mpi, source: &str, dir: &Path) -> Result<PathBuf> {
    let exe = dir.join(format!("{source}-{}", mpi.cc));
    let out = Command::new(mpi.cc)
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(programs_dir().join(source))
        .output()
        .with_context(|| {
            format!(
                "{} not found (apt-get install the MPI's -dev package)",
                mpi.cc
            )
        })?;
    if !out.status.success() {
        bail!(
            "{} {source}: {}",
            mpi.cc,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(exe)
}

/// A launcher command as root may run it.
fn launch(mpi: &Mpi, ranks: u32) -> Command {
    let mut cmd = Command::new(mpi.run);
    cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .args(["-n", &ranks.to_string()])
        .args(mpi.flags);
    cmd
}

fn run_ok(mut cmd: Command) -> Result<String> {
    let out = cmd.output().with_context(|| format!("{cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `key=value` of the program's output line.
fn field(text: &str, key: &str) -> Option<f64> {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{key}="))?.parse().ok())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The wrapper cost per call, for each MPI.
pub fn wrappers(strobe: &Path, runs: usize) -> Result<()> {
    let dir = tempfile::tempdir()?;
    println!("MPI wrapper cost: mpi_wrapcost 41 blocks x 300 (Isend, Recv, Wait to self), {runs} runs, median");
    println!(
        "{:<10} {:>12} {:>12} {:>14}",
        "MPI", "PMPI_ ns", "MPI_ ns", "wrapper ns"
    );
    for mpi in &MPIS {
        let exe = match build(mpi, "mpi_wrapcost.c", dir.path()) {
            Ok(e) => e,
            Err(e) => {
                println!("{:<10} skipped: {e:#}", mpi.name);
                continue;
            }
        };
        let (mut bare, mut wrapped, mut cost) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..runs {
            let mut cmd = launch(mpi, 1);
            cmd.arg(strobe)
                .args(["sample", "-q", "--output-dir"])
                .arg(dir.path().join("out"))
                .arg("--")
                .arg(&exe)
                .args(["41", "300"]);
            let out = run_ok(cmd)?;
            let (b, w) = (field(&out, "pmpi_ns"), field(&out, "mpi_ns"));
            if let (Some(b), Some(w)) = (b, w) {
                bare.push(b);
                wrapped.push(w);
                cost.push(w - b);
            }
        }
        println!(
            "{:<10} {:>12.1} {:>12.1} {:>14.1}",
            mpi.name,
            median(&mut bare),
            median(&mut wrapped),
            median(&mut cost)
        );
    }
    Ok(())
}

/// Clock alignment error against a known skew, for each MPI.
pub fn clocks(strobe: &Path, runs: usize) -> Result<()> {
    let dir = tempfile::tempdir()?;
    println!(
        "Clock alignment: 2 ranks of mpi_pingpong, rank 1 skewed by {SKEW_NS} ns; |offset + skew| over {runs} runs"
    );
    println!(
        "{:<10} {:>8} {:>14} {:>14} {:>12}",
        "MPI", "phase", "median err ns", "max err ns", "median rtt ns"
    );
    for mpi in &MPIS {
        let exe = match build(mpi, "mpi_pingpong.c", dir.path()) {
            Ok(e) => e,
            Err(e) => {
                println!("{:<10} skipped: {e:#}", mpi.name);
                continue;
            }
        };
        let mut errors: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        let mut rtts: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        // The error of the offset the exports apply, at worst over the run.
        let mut applied = Vec::new();
        for run in 0..runs {
            let out = dir.path().join(format!("{}-{run}", mpi.cc));
            let rank = |cmd: &mut Command| {
                cmd.arg(strobe)
                    .args(["sample", "-q", "--output-dir"])
                    .arg(&out)
                    .arg("--")
                    .arg(&exe)
                    .arg("2000");
            };
            let mut cmd = launch(mpi, 1);
            rank(&mut cmd);
            cmd.args([":", "-n", "1"])
                .args(mpi.flags)
                .args(["env", &format!("STROBE_MPI_CLOCK_SKEW_NS={SKEW_NS}")]);
            rank(&mut cmd);
            run_ok(cmd)?;
            for db in databases(&out) {
                let p = strobe_db::Profile::open(&[db.to_string_lossy()])?;
                let rank = p.setting("mpi.rank").ok().flatten();
                if rank.as_deref() != Some("1") {
                    continue;
                }
                let mut points = Vec::new();
                for c in p.clock_sync_points()? {
                    let finalize = c.phase == "finalize";
                    errors[usize::from(finalize)].push((c.offset_ns + SKEW_NS).abs() as f64);
                    rtts[usize::from(finalize)].push(c.rtt_ns as f64);
                    points.push((c.local_ns, c.offset_ns, c.rtt_ns));
                }
                let shift = strobe_db::visit::Shift::with_sync(0, &points);
                let worst = points
                    .iter()
                    .map(|p| (shift.at(p.0) + SKEW_NS).abs())
                    .max()
                    .unwrap_or(0);
                applied.push(worst as f64);
            }
        }
        let worst = applied.iter().copied().fold(0.0, f64::max);
        println!(
            "{:<10} {:>8} {:>14.0} {:>14.0}",
            mpi.name,
            "applied",
            median(&mut applied),
            worst
        );
        for (i, phase) in ["init", "finalize"].iter().enumerate() {
            let max = errors[i].iter().copied().fold(0.0, f64::max);
            println!(
                "{:<10} {:>8} {:>14.0} {:>14.0} {:>12.0}",
                mpi.name,
                phase,
                median(&mut errors[i]),
                max,
                median(&mut rtts[i])
            );
        }
    }
    Ok(())
}

/// The databases under `dir`.
fn databases(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() && !p.is_symlink() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "db") {
                out.push(p);
            }
        }
    }
    out
}
