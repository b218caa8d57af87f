//! `strobe-bench overhead`: what profiling costs a CPU-bound program, with
//! strobe and, side by side in the same run, with `perf record`.
//!
//! Builds `tests/programs/fixedwork.c` (a fixed amount of work, so time
//! grows with overhead) and runs every configuration in interleaved rounds,
//! reporting the median wall time and CPU time of each against the
//! unprofiled baseline. Needs `cc`; perf configurations are skipped (with
//! the reason printed) when `perf record` cannot run here.

use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// Options of `strobe-bench overhead`.
#[derive(Debug, Args)]
pub struct OverheadArgs {
    /// Millions of loop iterations of work per run (about 2 s at 250).
    #[arg(long, default_value_t = 250)]
    millions: u64,
    /// Interleaved rounds; medians are reported.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// The strobe binary (default: next to this benchmark).
    #[arg(long)]
    strobe: Option<PathBuf>,
    /// Skip the perf configurations.
    #[arg(long)]
    no_perf: bool,
}

struct Config {
    name: &'static str,
    argv: Vec<String>,
}

/// Builds the C test programs named in `names` into `dir` (with the
/// shared library they call), returning the directory.
pub fn build_programs(dir: &Path, names: &[&str]) -> Result<()> {
    let programs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/programs");
    let cc = |args: &[&str]| -> Result<()> {
        let status = Command::new("cc")
            .args(args)
            .status()
            .context("running cc")?;
        if !status.success() {
            bail!("cc {} failed", args.join(" "));
        }
        Ok(())
    };
    let lib = dir.join("libhotlib.so");
    cc(&[
        "-O2",
        "-g",
        "-fomit-frame-pointer",
        "-shared",
        "-fPIC",
        "-o",
        lib.to_str().unwrap(),
        programs.join("libhotlib.c").to_str().unwrap(),
    ])?;
    for name in names {
        let out = dir.join(name);
        let src = programs.join(format!("{name}.c"));
        let rpath = format!("-Wl,-rpath,{}", dir.display());
        let libdir = format!("-L{}", dir.display());
        cc(&[
            "-O2",
            "-g",
            "-fomit-frame-pointer",
            "-o",
            out.to_str().unwrap(),
            src.to_str().unwrap(),
            &libdir,
            "-lhotlib",
            &rpath,
            "-lpthread",
            "-ldl",
        ])?;
    }
    Ok(())
}

/// The strobe binary beside this benchmark binary, or `explicit`.
pub fn strobe_binary(explicit: Option<&Path>) -> Result<PathBuf> {
    let path = match explicit {
        Some(p) => p.to_path_buf(),
        None => std::env::current_exe()?.with_file_name("strobe"),
    };
    if !path.is_file() {
        bail!(
            "{} does not exist; build it with `cargo build --release --workspace`",
            path.display()
        );
    }
    Ok(path)
}

/// Why perf cannot be used here, if it cannot.
pub fn perf_unavailable(dir: &Path) -> Option<String> {
    let out = Command::new("perf")
        .args(["record", "-q", "-o"])
        .arg(dir.join("probe.data"))
        .args(["--", "true"])
        .output();
    match out {
        Err(e) => Some(format!("perf cannot be started: {e}")),
        Ok(o) if !o.status.success() => Some(format!(
            "perf record fails: {}",
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .next()
                .unwrap_or("")
        )),
        Ok(_) => None,
    }
}

fn children_cpu_s() -> f64 {
    // SAFETY: rusage is plain old data filled by the call.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs the benchmark and prints one line per configuration.
pub fn run(args: &OverheadArgs) -> Result<()> {
    let dir = tempfile::tempdir()?;
    build_programs(dir.path(), &["fixedwork"])?;
    let strobe = strobe_binary(args.strobe.as_deref())?;
    let prog = dir.path().join("fixedwork").display().to_string();
    let m = args.millions.to_string();
    let out = dir.path().join("out").display().to_string();
    let s = strobe.display().to_string();
    let mut configs = vec![
        Config {
            name: "baseline (no profiler)",
            argv: vec![prog.clone(), m.clone()],
        },
        Config {
            name: "strobe, CPU time 250 Hz (default)",
            argv: vec![
                s.clone(),
                "sample".into(),
                "-q".into(),
                "--output-dir".into(),
                out.clone(),
                "--".into(),
                prog.clone(),
                m.clone(),
            ],
        },
        Config {
            name: "strobe, + real time 1 kHz",
            argv: vec![
                s.clone(),
                "sample".into(),
                "-q".into(),
                "--output-dir".into(),
                out.clone(),
                "--sampling-realtime".into(),
                "--sampling-realtime-freq".into(),
                "1000".into(),
                "--".into(),
                prog.clone(),
                m.clone(),
            ],
        },
        Config {
            name: "strobe --sampler kernel, 1 kHz, 16 KiB stacks",
            argv: vec![
                s.clone(),
                "sample".into(),
                "-q".into(),
                "--output-dir".into(),
                out.clone(),
                "--sampler".into(),
                "kernel".into(),
                "--sampling-freq".into(),
                "1000".into(),
                "--".into(),
                prog.clone(),
                m.clone(),
            ],
        },
    ];
    match (args.no_perf, perf_unavailable(dir.path())) {
        (true, _) => println!("perf: skipped (--no-perf)"),
        (false, Some(why)) => println!("perf: skipped ({why})"),
        (false, None) => {
            let data = dir.path().join("perf.data").display().to_string();
            for (name, extra) in [
                (
                    "perf record -g, 250 Hz (frame pointers)",
                    vec!["-F", "250", "-g"],
                ),
                (
                    "perf record --call-graph dwarf, 250 Hz",
                    vec!["-F", "250", "--call-graph", "dwarf"],
                ),
                ("perf record -g, 1 kHz", vec!["-F", "1000", "-g"]),
                (
                    "perf record --call-graph dwarf,16384, 1 kHz",
                    vec!["-F", "1000", "--call-graph", "dwarf,16384"],
                ),
            ] {
                let mut argv: Vec<String> = vec![
                    "perf".into(),
                    "record".into(),
                    "-q".into(),
                    "-o".into(),
                    data.clone(),
                ];
                argv.extend(extra.iter().map(|s| s.to_string()));
                argv.extend(["--".into(), prog.clone(), m.clone()]);
                configs.push(Config { name, argv });
            }
        }
    }
    let mut wall: Vec<Vec<f64>> = vec![Vec::new(); configs.len()];
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); configs.len()];
    for round in 0..args.rounds {
        for (i, c) in configs.iter().enumerate() {
            let cpu0 = children_cpu_s();
            let t0 = Instant::now();
            let status = Command::new(&c.argv[0])
                .args(&c.argv[1..])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()?;
            let elapsed = t0.elapsed().as_secs_f64();
            if !status.success() {
                bail!("{} failed in round {round}: {status}", c.name);
            }
            wall[i].push(elapsed);
            cpu[i].push(children_cpu_s() - cpu0);
        }
    }
    let base_wall = median(wall[0].clone());
    let base_cpu = median(cpu[0].clone());
    println!(
        "{:<44} {:>10} {:>10} {:>10} {:>10}",
        "configuration", "wall s", "overhead", "cpu s", "overhead"
    );
    for (i, c) in configs.iter().enumerate() {
        let w = median(wall[i].clone());
        let u = median(cpu[i].clone());
        println!(
            "{:<44} {:>10.3} {:>9.2}% {:>10.3} {:>9.2}%",
            c.name,
            w,
            (w / base_wall - 1.0) * 100.0,
            u,
            (u / base_cpu - 1.0) * 100.0
        );
    }
    Ok(())
}
