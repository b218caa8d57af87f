//! `strobe-bench clocks`: what each way of reading time costs here, so the
//! choice of strobe's hot-path timestamp (`strobe_core::clock::now_ns`) is
//! measured rather than assumed.

use clap::Args;
use std::hint::black_box;
use std::time::Instant;
use strobe_core::clock::{cycles, now_ns, Clock};

/// Options of `strobe-bench clocks`.
#[derive(Debug, Args)]
pub struct ClocksArgs {
    /// Reads per measurement.
    #[arg(long, default_value_t = 2_000_000)]
    iterations: u64,
    /// Measurements per clock; the fastest is reported (least disturbed).
    #[arg(long, default_value_t = 5)]
    repeats: u32,
}

fn ns_per_call(iterations: u64, repeats: u32, mut read: impl FnMut() -> u64) -> f64 {
    (0..repeats)
        .map(|_| {
            let start = Instant::now();
            let mut acc = 0u64;
            for _ in 0..iterations {
                acc = acc.wrapping_add(read());
            }
            black_box(acc);
            start.elapsed().as_nanos() as f64 / iterations as f64
        })
        .fold(f64::INFINITY, f64::min)
}

/// Resolution of a clock: the smallest non-zero step seen between reads
/// during 50 ms of wall time.
fn resolution_ns(clock: Clock) -> u64 {
    let mut smallest = u64::MAX;
    let mut last = clock.read_ns();
    let start = Instant::now();
    while start.elapsed().as_millis() < 50 {
        let t = clock.read_ns();
        if t > last {
            smallest = smallest.min(t - last);
        }
        last = t;
    }
    smallest
}

/// A function that reads one timestamp.
type Reader = fn() -> u64;

/// Runs the benchmark and prints one line per clock.
pub fn run(args: &ClocksArgs) -> anyhow::Result<()> {
    let n = args.iterations;
    let r = args.repeats;
    println!(
        "{:<38} {:>10} {:>14}",
        "timestamp source", "ns/read", "resolution ns"
    );
    let rows: [(&str, Option<Clock>, Reader); 7] = [
        (
            "strobe now_ns (CLOCK_MONOTONIC)",
            Some(Clock::Monotonic),
            now_ns,
        ),
        ("rdtsc (raw cycles)", None, cycles),
        (
            "CLOCK_MONOTONIC_COARSE",
            Some(Clock::MonotonicCoarse),
            || Clock::MonotonicCoarse.read_ns(),
        ),
        ("CLOCK_REALTIME", Some(Clock::Realtime), || {
            Clock::Realtime.read_ns()
        }),
        ("CLOCK_BOOTTIME", Some(Clock::Boottime), || {
            Clock::Boottime.read_ns()
        }),
        ("CLOCK_THREAD_CPUTIME_ID", Some(Clock::ThreadCpu), || {
            Clock::ThreadCpu.read_ns()
        }),
        ("CLOCK_PROCESS_CPUTIME_ID", Some(Clock::ProcessCpu), || {
            Clock::ProcessCpu.read_ns()
        }),
    ];
    let mut summary = f64::NAN;
    for (name, clock, read) in rows {
        // The CPU-time clocks are system calls: fewer iterations keep the run short.
        let iterations = if clock.is_some_and(|c| matches!(c, Clock::ThreadCpu | Clock::ProcessCpu))
        {
            n / 20
        } else {
            n
        };
        let cost = ns_per_call(iterations, r, read);
        let resolution = clock.map_or("-".to_string(), |c| resolution_ns(c).to_string());
        println!("{name:<38} {cost:>10.1} {resolution:>14}");
        if clock == Some(Clock::Monotonic) {
            summary = cost;
        }
    }
    println!("strobe timestamp: {summary:.1} ns/read");
    Ok(())
}
