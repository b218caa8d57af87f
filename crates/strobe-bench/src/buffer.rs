//! `strobe-bench buffer`: throughput of the buffered record service
//! (strobe-buffer). Prints figures; never asserts timings.
//!
//! Measures emplacing a 32-byte record (`CounterRecord`) on one and two
//! producer threads (producer-side rate), the per-context and global
//! emission paths, and lossless end-to-end throughput (producers → callback
//! thread → no-op callback, until `flush` returns).

use clap::Args;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Instant;
use strobe_buffer::record::CounterRecord;
use strobe_buffer::{Buffer, BufferOptions, Context, Kind, Policy};

/// Options of `strobe-bench buffer`.
#[derive(Args, Debug)]
pub struct BufferArgs {
    /// Records per producer thread in each run.
    #[arg(long, default_value_t = 20_000_000)]
    records: u64,
    /// Runs per figure (the best run is reported).
    #[arg(long, default_value_t = 3)]
    runs: u32,
    /// Buffer size in bytes for the emplace figures.
    #[arg(long, default_value_t = 1 << 20)]
    emplace_size: usize,
    /// Records per thread for the isolated producer figures (each thread's
    /// block holds them all, so no delivery runs while they are timed).
    #[arg(long, default_value_t = 1_000_000)]
    isolated_records: u64,
    /// Buffer size in bytes for the end-to-end figures.
    #[arg(long, default_value_t = 64 << 10)]
    e2e_size: usize,
}

#[derive(Clone, Copy)]
enum Path {
    Buffer,
    Context,
    Global,
}

struct Setup {
    ctx: Context,
    buffer: Buffer,
    delivered: Arc<AtomicU64>,
}

fn setup(size: usize, blocks: usize) -> anyhow::Result<Setup> {
    let ctx = Context::create()?;
    let delivered = Arc::new(AtomicU64::new(0));
    let d = delivered.clone();
    let buffer = Buffer::create(
        &ctx,
        BufferOptions::new(size, size, Policy::Lossless).blocks(blocks),
        move |del| {
            d.fetch_add(del.records.len() as u64, Ordering::Relaxed);
        },
    )?;
    ctx.configure_buffer_tracing(Kind::Counter, None, &buffer)?;
    ctx.start()?;
    Ok(Setup {
        ctx,
        buffer,
        delivered,
    })
}

/// Runs `threads` producers of `records` each; returns (producer seconds
/// = slowest thread, end-to-end seconds until flush returned).
fn produce(s: &Setup, threads: usize, records: u64, path: Path) -> anyhow::Result<(f64, f64)> {
    let barrier = Arc::new(Barrier::new(threads + 1));
    let start_all = std::thread::scope(|scope| {
        let mut handles = Vec::new();
        for t in 0..threads {
            let barrier = barrier.clone();
            let (ctx, buffer) = (s.ctx, s.buffer);
            handles.push(scope.spawn(move || {
                let mut r = CounterRecord {
                    counter_id: t as u64,
                    ..Default::default()
                };
                barrier.wait();
                let start = Instant::now();
                for i in 0..records {
                    r.timestamp_ns = i;
                    match path {
                        Path::Buffer => {
                            buffer.emplace(0, &r);
                        }
                        Path::Context => {
                            ctx.emit(0, &r);
                        }
                        Path::Global => {
                            strobe_buffer::emit(0, &r);
                        }
                    }
                }
                start.elapsed().as_secs_f64()
            }));
        }
        barrier.wait();
        let start_all = Instant::now();
        let slowest = handles
            .into_iter()
            .map(|h| h.join().unwrap_or(f64::NAN))
            .fold(0.0, f64::max);
        (start_all, slowest)
    });
    let (start_all, producer) = start_all;
    s.buffer.flush()?;
    let e2e = start_all.elapsed().as_secs_f64();
    Ok((producer, e2e))
}

fn best<F: FnMut() -> anyhow::Result<(f64, f64)>>(
    runs: u32,
    mut f: F,
) -> anyhow::Result<(f64, f64)> {
    let mut best = (f64::INFINITY, f64::INFINITY);
    for _ in 0..runs.max(1) {
        let (p, e) = f()?;
        best.0 = best.0.min(p);
        best.1 = best.1.min(e);
    }
    Ok(best)
}

fn mrate(records: u64, secs: f64) -> f64 {
    records as f64 / secs / 1e6
}

/// Runs the benchmark and prints its figures.
pub fn run(args: BufferArgs) -> anyhow::Result<()> {
    let n = args.records;
    println!(
        "strobe-buffer benchmark: 32-byte records, {} per thread, best of {} runs, {} CPUs",
        n,
        args.runs,
        std::thread::available_parallelism().map_or(0, |p| p.get())
    );

    let s = setup(args.emplace_size, 8)?;
    // Warm-up: fault in everything once.
    produce(&s, 1, n / 10, Path::Buffer)?;
    let (p1, _) = best(args.runs, || produce(&s, 1, n, Path::Buffer))?;
    let one = mrate(n, p1);
    println!(
        "emplace, 1 thread (Buffer::emplace):        {one:8.1} M records/s  ({:.2} ns/record)",
        p1 * 1e9 / n as f64
    );
    let (pc, _) = best(args.runs, || produce(&s, 1, n, Path::Context))?;
    println!(
        "emplace, 1 thread (Context::emit):          {:8.1} M records/s",
        mrate(n, pc)
    );
    let (p2, _) = best(args.runs, || produce(&s, 2, n, Path::Buffer))?;
    let two = mrate(2 * n, p2);
    println!(
        "emplace, 2 threads (Buffer::emplace):       {two:8.1} M records/s  ({:.2}x one thread)",
        two / one
    );
    let delivered = s.delivered.load(Ordering::Relaxed);
    let stats = s.buffer.stats();
    println!(
        "  checks: delivered {} records, dropped {}, lossless waits {} ({:.1} ms)",
        delivered,
        stats.records_dropped,
        stats.lossless_waits,
        stats.lossless_wait_ns as f64 / 1e6
    );
    s.ctx.stop()?;

    // Producer path alone: blocks big enough for every record, so the
    // callback thread does not compete for the CPU while producers run.
    let m = args.isolated_records;
    let iso = setup((m as usize) * 32, 3)?;
    produce(&iso, 2, m, Path::Buffer)?;
    let (i1, _) = best(args.runs * 3, || produce(&iso, 1, m, Path::Buffer))?;
    let (i2, _) = best(args.runs * 3, || produce(&iso, 2, m, Path::Buffer))?;
    let (iso_one, iso_two) = (mrate(m, i1), mrate(2 * m, i2));
    println!("emplace, isolated (no delivery while timed), 1 thread: {iso_one:8.1} M records/s");
    println!(
        "emplace, isolated (no delivery while timed), 2 threads: {iso_two:8.1} M records/s  ({:.2}x one thread)",
        iso_two / iso_one
    );
    iso.ctx.stop()?;

    let g = setup(args.emplace_size, 8)?;
    let (pg, _) = best(args.runs, || produce(&g, 1, n, Path::Global))?;
    println!(
        "emit, 1 thread (global strobe_buffer::emit): {:8.1} M records/s",
        mrate(n, pg)
    );
    g.ctx.stop()?;

    let e = setup(args.e2e_size, 4)?;
    produce(&e, 1, n / 10, Path::Buffer)?;
    let (_, e1) = best(args.runs, || produce(&e, 1, n, Path::Buffer))?;
    let e2e_one = mrate(n, e1);
    println!(
        "lossless end to end, 1 producer ({} KiB blocks, no-op callback): {e2e_one:8.1} M records/s",
        args.e2e_size >> 10
    );
    let (_, e2) = best(args.runs, || produce(&e, 2, n, Path::Buffer))?;
    let e2e_two = mrate(2 * n, e2);
    println!("lossless end to end, 2 producers:           {e2e_two:8.1} M records/s");
    let stats = e.buffer.stats();
    println!(
        "  checks: delivered {} records in {} callbacks, dropped {}, lossless waits {} ({:.1} ms)",
        e.delivered.load(Ordering::Relaxed),
        stats.callbacks,
        stats.records_dropped,
        stats.lossless_waits,
        stats.lossless_wait_ns as f64 / 1e6
    );
    e.ctx.stop()?;

    println!(
        "summary: emplace 1 thread {one:.1} M/s, 2 threads {two:.1} M/s ({:.2}x); isolated 1 thread {iso_one:.1} M/s, 2 threads {iso_two:.1} M/s ({:.2}x); lossless end to end {e2e_one:.1} M/s (1 producer), {e2e_two:.1} M/s (2 producers)",
        two / one,
        iso_two / iso_one
    );
    Ok(())
}
