//! `strobe-bench export`: conversion throughput and peak memory.
//!
//! Generates a synthetic database through the real `strobe_db::Writer`
//! (8 threads; regions in three nesting levels with 64 names; call-stack
//! samples drawn from 4096 symbolized stacks of depth 8-40, one in eight
//! off CPU; a counter), then converts it with strobe-export, each format
//! in a child process of this binary so that its peak RSS (from `wait4`)
//! is the conversion's alone, timed from the child's start (opening the
//! database included). Prints events per second and peak RSS; never
//! asserts a timing.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use clap::Args;
use strobe_db::{
    CounterInfo, FrameSymbols, ModuleRow, NodeInfo, ProcessInfo, Region, SampleKind, SampleMeta,
    StackFrame, ThreadInfo, Writer, WriterOptions,
};

/// Arguments of `strobe-bench export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Regions in the generated database.
    #[arg(long, default_value_t = 200_000)]
    pub rows: u64,
    /// Call-stack samples in the generated database.
    #[arg(long, default_value_t = 800_000)]
    pub samples: u64,
    /// Database to convert; generated with `--rows` regions and `--samples` samples if it does
    /// not exist.
    #[arg(long, default_value = "strobe-bench-export.db")]
    pub db: PathBuf,
    /// Formats to convert to (comma-separated): pftrace, json, csv, firefox, pprof, folded, svg,
    /// parquet (rows of every table).
    #[arg(
        long,
        default_value = "pftrace,json,csv,firefox,pprof,folded,svg",
        value_delimiter = ','
    )]
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
/// Distinct call stacks the samples are drawn from.
const STACKS: u64 = 4096;
/// Distinct functions of the synthetic library.
const FUNCTIONS: u64 = 2000;
/// Time between two steps of one thread (ns).
const STEP_NS: u64 = 1_000;

/// The call stack number `k`, leaf first: 8 to 40 frames whose outer
/// frames are shared by neighbouring stacks (a tree, as real programs);
/// stacks that differ in the low 6 bits of `k` differ only near the leaf.
fn synthetic_stack(k: u64, module: strobe_db::ModuleId) -> Vec<StackFrame> {
    let depth = 8 + ((k >> 6) * 7) % 33;
    let mut frames: Vec<StackFrame> = (0..depth)
        .map(|d| {
            let shared = k >> (12 - (d * 12 / depth)); // root: 0, leaf: k
            StackFrame {
                module: Some(module),
                rel_pc: 0x1000 + ((shared * 31 + d) % FUNCTIONS) * 0x100,
            }
        })
        .collect();
    frames.reverse();
    frames
}

/// How many of `total` items are due after `step + 1` of `steps` steps.
fn due(total: u64, step: u64, steps: u64) -> u64 {
    (total as u128 * (step as u128 + 1) / steps as u128) as u64
}

/// Writes `rows` regions and `samples` samples spread evenly over the
/// threads and the run: per thread, repeated outer/middle/inner nests and
/// samples between them.
fn generate(path: &Path, rows: u64, samples: u64) -> anyhow::Result<()> {
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
    let tracks: Vec<_> = threads
        .iter()
        .map(|t| w.add_track(Some(*t), "samples"))
        .collect::<Result<_, _>>()?;
    let module = w.add_module(&ModuleRow {
        path: "/usr/lib/libsynthetic.so",
        build_id: Some("5ca1ab1e"),
        load_address: 0x7f00_0000_0000,
        size: 0x1000 + FUNCTIONS * 0x100,
        file_offset: 0,
        load_ns: Some(1_000),
    })?;
    let mut symbols = Vec::new();
    for j in 0..FUNCTIONS {
        let frame = w.intern_frame(StackFrame {
            module: Some(module),
            rel_pc: 0x1000 + j * 0x100,
        })?;
        symbols.push((frame, format!("synthetic::function_{j}")));
    }
    let fs: Vec<_> = symbols
        .iter()
        .map(|(frame, name)| FrameSymbols {
            frame: *frame,
            function: Some(name),
            file: Some("synthetic.rs"),
            line: Some(1),
        })
        .collect();
    w.set_frame_symbols(&fs)?;
    let stacks: Vec<_> = (0..STACKS).map(|k| synthetic_stack(k, module)).collect();
    let ctr = w.add_counter(&CounterInfo {
        name: "queue_depth",
        description: None,
        units: Some("items"),
        component: None,
        accumulating: false,
        expression: None,
    })?;
    // Per thread and step: up to one nest of three regions, some samples.
    let per_thread_step = 3 * THREADS as u64;
    let steps = rows
        .div_ceil(per_thread_step)
        .max(samples.div_ceil(THREADS as u64))
        .max(1);
    let (mut regions_done, mut samples_done) = (0u64, 0u64);
    // Each thread's current stack: mostly a neighbour of its last one (as
    // consecutive samples of a real thread), a new one every 64 samples.
    let mut current = [0u64; THREADS as usize];
    for i in 0..steps {
        let t = 10_000 + i * STEP_NS;
        let sample_quota = due(samples, i, steps) - samples_done;
        for (k, th) in threads.iter().enumerate() {
            let base = t + k as u64;
            // Innermost first: regions complete in end order, as recorded.
            for (lvl, (s, e)) in [
                (base + 200, base + 400),
                (base + 100, base + 600),
                (base, base + 900),
            ]
            .into_iter()
            .enumerate()
            {
                if regions_done >= due(rows, i, steps) {
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
                regions_done += 1;
            }
        }
        for n in 0..sample_quota {
            let k = (samples_done + n) as usize % THREADS as usize;
            let n_all = samples_done + n;
            let hash = n_all.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32;
            current[k] = if (n_all / THREADS as u64).is_multiple_of(64) {
                hash % STACKS
            } else {
                current[k] ^ (1 << (hash % 6))
            };
            let id = current[k];
            let ts = t + 950 + n * 40 / sample_quota.max(1);
            let meta = if (samples_done + n) % 8 == 7 {
                SampleMeta {
                    timestamp_ns: ts,
                    kind: SampleKind::OffCpu,
                    weight_ns: 20,
                }
            } else {
                SampleMeta::cpu(ts, 4_000_000)
            };
            w.append_sample(tracks[k], meta, &stacks[id as usize])?;
        }
        samples_done += sample_quota;
        if i.is_multiple_of(64) {
            w.append_counter_sample(ctr, None, t, (i % 100) as f64)?;
        }
    }
    w.finish(10_000 + steps * STEP_NS + 10_000)?;
    let s = t0.elapsed().as_secs_f64();
    println!(
        "generated {rows} regions and {samples} samples in {s:.1} s ({:.0} rows/s), {:.0} MiB",
        (rows + samples) as f64 / s,
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
    let fold = strobe_export::folded::FoldOptions::default();
    use strobe_export::Format as F;
    let events = match f {
        F::Perfetto => strobe_export::perfetto::write_perfetto(&p, file)?.events,
        F::Chrome => {
            let s = strobe_export::chrome::write_chrome(&p, file)?;
            s.regions + s.instants + s.counters + s.metadata + s.samples
        }
        F::Firefox => {
            let s = strobe_export::firefox::write_firefox(&p, file)?;
            s.samples + s.markers
        }
        F::Pprof => strobe_export::pprof::write_pprof(&p, file)?.samples,
        F::Folded => strobe_export::folded::write_folded(&p, fold, file)?,
        F::Svg => strobe_export::folded::write_flamegraph(&p, fold, "bench", file)?,
        F::Parquet => {
            drop(file);
            std::fs::remove_file(&path)?;
            strobe_export::parquet::write_parquet(&p, &path)?.total_rows()
        }
        F::Csv => {
            drop(file);
            std::fs::remove_file(&path)?;
            strobe_export::csv::write_csv(&p, out_dir, "bench")?
                .iter()
                .map(|(_, n)| *n)
                .sum()
        }
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
    for f in &a.formats {
        f.parse::<strobe_export::Format>()?;
    }
    std::fs::create_dir_all(&a.out_dir)?;
    if !a.db.exists() {
        generate(&a.db, a.rows, a.samples)?;
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
                    if e.path().is_dir() {
                        let _ = std::fs::remove_dir_all(e.path());
                    } else {
                        let _ = std::fs::remove_file(e.path());
                    }
                }
            }
        }
    }
    Ok(())
}
