//! `strobe-bench export`: conversion throughput and peak memory.
//!
//! Generates a synthetic regions database through the real
//! `strobe_db::Writer` (8 threads, three nesting levels, 64 names, a
//! counter), then converts it with strobe-export, each format in a child
//! process of this binary so that its peak RSS (from `wait4`) is the
//! conversion's alone. Prints events per second and peak RSS; never
//! asserts a timing.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use clap::Args;
use strobe_db::{CounterInfo, NodeInfo, ProcessInfo, Region, ThreadInfo, Writer, WriterOptions};

/// Arguments of `strobe-bench export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Regions in the generated database.
    #[arg(long, default_value_t = 1_000_000)]
    pub rows: u64,
    /// Database to convert; generated with `--rows` regions if it does not exist.
    #[arg(long, default_value = "strobe-bench-export.db")]
    pub db: PathBuf,
    /// Formats to convert to (comma-separated).
    #[arg(long, default_value = "pftrace", value_delimiter = ',')]
    pub formats: Vec<String>,
    /// Directory for the outputs (removed after each conversion unless --keep).
    #[arg(long, default_value = ".")]
    pub out_dir: PathBuf,
    /// Keep the converted files.
    #[arg(long)]
    pub keep: bool,
    /// Internal: convert the database to this one format in this process.
    #[arg(long, hide = true)]
    pub child: Option<String>,
}

const THREADS: u32 = 8;
const NAMES: usize = 64;

/// Writes `rows` regions: per thread, repeated outer/middle/inner nests.
fn generate(path: &Path, rows: u64) -> anyhow::Result<()> {
    let t0 = Instant::now();
    let info = ProcessInfo {
        pid: 4242,
        ppid: 1,
        init_ns: 1_000,
        start_ns: 1_000,
        start_unix_ns: 1_763_000_000_000_000_000,
        command: "synthetic-export-bench".into(),
        environment: Vec::new(),
    };
    let opts = WriterOptions {
        node: Some(NodeInfo {
            machine_id: "strobe-bench".into(),
            hostname: "bench".into(),
            ..NodeInfo::default()
        }),
        ..WriterOptions::default()
    };
    let mut w = Writer::create(path, &info, opts)?;
    let names: Vec<_> = (0..NAMES)
        .map(|k| w.intern_string(&format!("region_{k}")))
        .collect::<Result<_, _>>()?;
    let threads: Vec<_> = (0..THREADS)
        .map(|k| {
            w.add_thread(&ThreadInfo {
                tid: 4242 + k,
                name: Some(&format!("worker-{k}")),
                start_ns: Some(1_000),
            })
        })
        .collect::<Result<_, _>>()?;
    let ctr = w.add_counter(&CounterInfo {
        name: "queue_depth",
        description: None,
        units: Some("items"),
        component: None,
        accumulating: false,
        expression: None,
    })?;
    let mut written = 0u64;
    let mut i = 0u64;
    while written < rows {
        for (k, th) in threads.iter().enumerate() {
            let t = 10_000 + i * 1_000 + k as u64;
            // Innermost first: regions complete in end order, as recorded.
            for (lvl, (s, e)) in [(t + 200, t + 400), (t + 100, t + 600), (t, t + 900)]
                .into_iter()
                .enumerate()
            {
                if written >= rows {
                    break;
                }
                w.append_region(&Region {
                    thread: *th,
                    start_ns: s,
                    end_ns: e,
                    name: names[((i as usize) * 3 + lvl) % NAMES],
                    category: None,
                    stack: None,
                    correlation_id: None,
                    args: &[],
                })?;
                written += 1;
            }
        }
        if i.is_multiple_of(64) {
            w.append_counter_sample(ctr, None, 10_000 + i * 1_000, (i % 100) as f64)?;
        }
        i += 1;
    }
    w.finish(10_000 + i * 1_000 + 10_000)?;
    let s = t0.elapsed().as_secs_f64();
    println!(
        "generated {} regions in {:.1} s ({:.0} regions/s), {:.0} MiB",
        rows,
        s,
        rows as f64 / s,
        std::fs::metadata(path)?.len() as f64 / (1 << 20) as f64
    );
    Ok(())
}

/// Converts in this process; prints `events N` for the parent.
fn child(db: &Path, format: &str, out_dir: &Path) -> anyhow::Result<()> {
    let f: strobe_export::Format = format.parse()?;
    let p = strobe_db::Profile::open_files(&[db.to_path_buf()])?;
    let path = out_dir.join(format!("bench{}", f.extension()));
    let file = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&path)?);
    let events = match f {
        strobe_export::Format::Perfetto => {
            strobe_export::perfetto::write_perfetto(&p, file)?.events
        }
        strobe_export::Format::Chrome => {
            let s = strobe_export::chrome::write_chrome(&p, file)?;
            s.regions + s.instants + s.counters + s.metadata
        }
        strobe_export::Format::Csv => {
            drop(file);
            std::fs::remove_file(&path)?;
            strobe_export::csv::write_csv(&p, out_dir, "bench")?
                .iter()
                .map(|(_, n)| *n)
                .sum()
        }
        other => bail!(
            "the export benchmark converts pftrace, json or csv, not {}",
            other.name()
        ),
    };
    println!("events {events}");
    Ok(())
}

/// Runs one conversion in a child and returns (events, seconds, peak RSS KiB).
fn measure(a: &ExportArgs, format: &str) -> anyhow::Result<(u64, f64, i64)> {
    let exe = std::env::current_exe()?;
    let t0 = Instant::now();
    let child = std::process::Command::new(exe)
        .args(["export", "--db"])
        .arg(&a.db)
        .arg("--out-dir")
        .arg(&a.out_dir)
        .args(["--child", format])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .context("spawning the conversion child")?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet waited for; both pointers are valid.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    let secs = t0.elapsed().as_secs_f64();
    if r != pid {
        bail!("wait4 failed: {}", std::io::Error::last_os_error());
    }
    let mut stdout = String::new();
    if let Some(mut o) = child.stdout {
        use std::io::Read;
        o.read_to_string(&mut stdout)?;
    }
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        bail!("conversion to {format} failed (status {status})");
    }
    let events = stdout
        .lines()
        .find_map(|l| l.strip_prefix("events "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    Ok((events, secs, ru.ru_maxrss))
}

/// Runs the benchmark.
pub fn run(a: ExportArgs) -> anyhow::Result<()> {
    if let Some(f) = &a.child {
        return child(&a.db, f, &a.out_dir);
    }
    std::fs::create_dir_all(&a.out_dir)?;
    if !a.db.exists() {
        generate(&a.db, a.rows)?;
    } else {
        println!("reusing {}", a.db.display());
    }
    for f in &a.formats {
        let (events, secs, rss) = measure(&a, f)?;
        println!(
            "{f}: {events} events in {secs:.2} s = {:.2} M events/s, peak RSS {:.1} MiB",
            events as f64 / secs / 1e6,
            rss as f64 / 1024.0
        );
        if !a.keep {
            for e in std::fs::read_dir(&a.out_dir)? {
                let e = e?;
                if e.file_name().to_string_lossy().starts_with("bench") {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }
    Ok(())
}
