//! `strobe-bench db`: the profile database benchmark.
//!
//! Generates a deterministic synthetic profile through the real
//! `strobe_db::Writer` and, in the same run, inserts the same rows with raw
//! prepared statements (same tables, same pragmas, same batch size;
//! strobe-db's `baseline`) to compare throughput; reports peak RSS from getrusage; optionally
//! writes several files and merges them to measure the merge rate. It
//! prints figures and never asserts timings.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use strobe_db::baseline::{RawRecord, RawSetup};
use strobe_db::{
    NodeInfo, ProcessInfo, Region, SampleMeta, StackFrame, ThreadInfo, Writer, WriterOptions,
};

/// Arguments of `strobe-bench db`.
#[derive(Debug, Args)]
pub struct DbArgs {
    /// Records to write (80% samples with call stacks, 20% regions).
    #[arg(long, default_value_t = 1_000_000)]
    pub rows: u64,
    /// Output database of the writer run (removed first if it exists).
    #[arg(long, default_value = "strobe-bench-db.db")]
    pub out: PathBuf,
    /// Rows per transaction, for both the writer and the raw baseline.
    #[arg(long, default_value_t = 20_000)]
    pub batch: usize,
    /// Skip the raw rusqlite baseline.
    #[arg(long)]
    pub no_raw: bool,
    /// Alternate writer and raw runs this many times and compare the best
    /// of each (the machine is shared; the best run is the least disturbed).
    #[arg(long, default_value_t = 5)]
    pub repeat: u32,
    /// Also write this many files of `--rows` records each and merge them.
    #[arg(long, default_value_t = 0)]
    pub merge_files: u32,
}

/// Deterministic xorshift64* generator.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

const THREADS: u32 = 8;
const STACKS: usize = 512;
const NAMES: usize = 64;

/// The synthetic workload: a fixed set of stacks (as module-relative pcs)
/// and a record sequence drawn from a seeded generator.
struct Workload {
    stacks: Vec<Vec<u64>>,
}

impl Workload {
    fn new() -> Workload {
        let mut r = Rng(0x5eed_0001);
        let stacks = (0..STACKS)
            .map(|_| {
                let depth = 5 + (r.next() % 26) as usize;
                let mut s: Vec<u64> = (0..depth)
                    .map(|d| 0x1000 + (d as u64) * 0x40 + (r.next() % 8) * 4)
                    .collect();
                s.reverse(); // leaf first
                s
            })
            .collect();
        Workload { stacks }
    }
}

fn records(n: u64, seed: u64) -> impl Iterator<Item = RawRecord> {
    let mut r = Rng(seed | 1);
    let mut ts = 1_000_000u64;
    (0..n).map(move |_| {
        ts += 1 + r.next() % 1000;
        let x = r.next();
        let thread = (x % u64::from(THREADS)) as usize;
        if (x >> 8).is_multiple_of(5) {
            let d = (x >> 16) % 100_000;
            RawRecord::Region {
                thread,
                start: ts,
                end: ts + d,
                name: ((x >> 40) as usize) % NAMES,
            }
        } else {
            RawRecord::Sample {
                thread,
                ts,
                stack: ((x >> 24) as usize) % STACKS,
            }
        }
    })
}

fn node() -> NodeInfo {
    NodeInfo {
        machine_id: "strobe-bench".into(),
        hostname: "bench".into(),
        system_name: "Linux".into(),
        ..NodeInfo::default()
    }
}

fn process(pid: u32) -> ProcessInfo {
    ProcessInfo {
        pid,
        ppid: 1,
        init_ns: 0,
        start_ns: 0,
        start_unix_ns: 1_700_000_000_000_000_000 + u64::from(pid),
        command: "synthetic".into(),
        environment: Vec::new(),
    }
}

fn remove_db(p: &Path) {
    for ext in ["", "-wal", "-shm"] {
        let mut s = p.as_os_str().to_owned();
        s.push(ext);
        let _ = std::fs::remove_file(PathBuf::from(s));
    }
}

/// Writes `n` records through the real writer; returns elapsed time.
fn write_with_writer(
    path: &Path,
    n: u64,
    batch: usize,
    pid: u32,
    w: &Workload,
) -> anyhow::Result<Duration> {
    remove_db(path);
    let t0 = Instant::now();
    let opts = WriterOptions {
        batch_rows: batch,
        node: Some(node()),
        ..WriterOptions::default()
    };
    let mut wr = Writer::create(path, &process(pid), opts)?;
    let m = wr.add_module(&strobe_db::ModuleRow {
        path: "/usr/lib/libsynthetic.so",
        build_id: Some("00ff"),
        load_address: 0x7f00_0000_0000,
        size: 1 << 20,
        ..Default::default()
    })?;
    let mut threads = Vec::new();
    let mut tracks = Vec::new();
    for k in 0..THREADS {
        let t = wr.add_thread(&ThreadInfo {
            tid: pid + k,
            name: Some("worker"),
            start_ns: Some(0),
        })?;
        tracks.push(wr.add_track(Some(t), "cpu samples")?);
        threads.push(t);
    }
    let names: Vec<_> = (0..NAMES)
        .map(|k| wr.intern_string(&format!("region_{k}")))
        .collect::<Result<_, _>>()?;
    let cat = wr.intern_string("user")?;
    let stacks: Vec<Vec<StackFrame>> = w
        .stacks
        .iter()
        .map(|s| {
            s.iter()
                .map(|pc| StackFrame {
                    module: Some(m),
                    rel_pc: *pc,
                })
                .collect()
        })
        .collect();
    let mut last = 0;
    for rec in records(n, u64::from(pid)) {
        match rec {
            RawRecord::Sample { thread, ts, stack } => {
                wr.append_sample(
                    tracks[thread],
                    SampleMeta::cpu(ts, 1_000_000),
                    &stacks[stack],
                )?;
                last = ts;
            }
            RawRecord::Region {
                thread,
                start,
                end,
                name,
            } => {
                wr.append_region_shared(&Region {
                    thread: threads[thread],
                    start_ns: start,
                    end_ns: end,
                    name: names[name],
                    category: Some(cat),
                    stack: None,
                    correlation_id: None,
                    args: &[],
                })?;
                last = end;
            }
        }
    }
    wr.finish(last + 1)?;
    Ok(t0.elapsed())
}

/// Inserts the same rows with raw prepared statements (stack ids taken
/// from a precomputed table, as an ideal writer that never interns would):
/// strobe-db's yardstick, [`strobe_db::baseline::write_raw`].
fn write_raw(path: &Path, n: u64, batch: usize, pid: u32) -> anyhow::Result<Duration> {
    remove_db(path);
    let t0 = Instant::now();
    let setup = RawSetup {
        pid,
        threads: THREADS,
        stacks: STACKS,
        names: NAMES,
        batch,
    };
    strobe_db::baseline::write_raw(path, &setup, records(n, u64::from(pid)))?;
    Ok(t0.elapsed())
}

fn peak_rss_kib() -> i64 {
    // SAFETY: rusage is plain old data; getrusage fills it for RUSAGE_SELF.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable rusage.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    u.ru_maxrss
}

/// Runs the benchmark.
pub fn run(a: DbArgs) -> anyhow::Result<()> {
    let w = Workload::new();
    println!(
        "strobe-bench db: {} records (80% samples with 5-30 frame stacks, 20% regions), batch {}",
        a.rows, a.batch
    );
    let rss0 = peak_rss_kib();
    let mut best_w = Duration::MAX;
    let mut best_r = Duration::MAX;
    let mut all_w = Vec::new();
    let mut all_r = Vec::new();
    let raw_path = a.out.with_extension("raw.db");
    let mut rss_writer = 0;
    for round in 0..a.repeat.max(1) {
        let tw = write_with_writer(&a.out, a.rows, a.batch, 1000, &w).context("writer run")?;
        rss_writer = rss_writer.max(peak_rss_kib());
        best_w = best_w.min(tw);
        all_w.push(tw);
        print!("round {round}: writer {:.3} s", tw.as_secs_f64());
        if !a.no_raw {
            let tr = write_raw(&raw_path, a.rows, a.batch, 1000).context("raw run")?;
            best_r = best_r.min(tr);
            all_r.push(tr);
            print!(", raw {:.3} s", tr.as_secs_f64());
            if std::env::var_os("STROBE_BENCH_KEEP_RAW").is_none() {
                remove_db(&raw_path);
            }
        }
        println!();
    }
    let size = std::fs::metadata(&a.out).map(|m| m.len()).unwrap_or(0);
    let wr = a.rows as f64 / best_w.as_secs_f64();
    println!(
        "writer (best): {:.3} s, {:.0} records/s, file {:.1} MiB ({})",
        best_w.as_secs_f64(),
        wr,
        size as f64 / 1048576.0,
        a.out.display()
    );
    println!(
        "peak RSS: {:.1} MiB before, {:.1} MiB after the writer runs (getrusage ru_maxrss)",
        rss0 as f64 / 1024.0,
        rss_writer as f64 / 1024.0
    );
    if a.merge_files > 0 {
        let dir = a.out.with_extension("merge-inputs");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let mut files = Vec::new();
        for k in 0..a.merge_files {
            let p = dir.join(format!("{}.db", 2000 + k * 16));
            write_with_writer(&p, a.rows, a.batch, 2000 + k * 16, &w)?;
            files.push(p);
        }
        let merged = dir.join("merged.db");
        let t0 = Instant::now();
        let stats = strobe_db::merge(&files, &merged, &mut |_| {})?;
        let dt = t0.elapsed().as_secs_f64();
        let size = std::fs::metadata(&merged).map(|m| m.len()).unwrap_or(0);
        println!(
            "merge: {} files, {} rows in {:.2} s = {:.0} rows/s (including index creation), output {:.1} MiB",
            stats.inputs, stats.rows, dt, stats.rows as f64 / dt, size as f64 / 1048576.0
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    if !a.no_raw {
        let rr = a.rows as f64 / best_r.as_secs_f64();
        println!(
            "raw rusqlite prepared inserts (best): {:.3} s, {:.0} records/s",
            best_r.as_secs_f64(),
            rr
        );
        println!("writer/raw = {:.3}", wr / rr);
    }
    Ok(())
}
