//! `strobe-bench api`: what a user-API region, marker and progress point
//! cost, with and without the runtime, and what the runtime's interposed
//! pthread mutex costs. Run it bare for the no-op cost and under `strobe
//! sample` for the recorded cost: `strobe sample -q -- strobe-bench api`.

use clap::Args;
use std::hint::black_box;
use std::time::Instant;

/// Options of `strobe-bench api`.
#[derive(Debug, Args)]
pub struct ApiArgs {
    /// Region push/pop pairs per measurement.
    #[arg(long, default_value_t = 2_000_000)]
    iterations: u64,

    /// Also time batches of this many regions with a 5 ms pause between
    /// them (untimed), so the collector empties the thread's ring: the
    /// cost of a region when the producer never waits (0 = skip).
    #[arg(long, default_value_t = 2_000)]
    batch: u64,
}

/// Runs the benchmark.
pub fn run(args: &ApiArgs) -> anyhow::Result<()> {
    let active = strobe::is_active();
    let n = args.iterations;
    let best = best_of_five(n, |_| {
        let _r = strobe::Region::new(c"bench-region");
    });
    let mark_best = best_of_five(n, |_| strobe::mark(c"bench-mark"));
    let mut batch_best = f64::INFINITY;
    if args.batch > 0 {
        for _ in 0..50 {
            std::thread::sleep(std::time::Duration::from_millis(5));
            let t0 = Instant::now();
            for i in 0..args.batch {
                let _r = strobe::Region::new(c"bench-batch");
                black_box(i);
            }
            batch_best = batch_best.min(t0.elapsed().as_nanos() as f64 / args.batch as f64);
        }
        println!(
            "user API, batches of {} regions after a pause: region push+pop {batch_best:.1} ns",
            args.batch
        );
    }
    let progress_best = best_of_five(n, |_| strobe::progress(c"bench-progress"));
    // An uncontended pthread mutex: the runtime interposes lock and unlock
    // (causal profiling's rules); outside `strobe causal` they forward.
    let mutex = std::cell::UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER);
    let lock_best = best_of_five(n, |_| {
        // SAFETY: a valid, initialised mutex, locked and unlocked by this
        // thread only.
        unsafe {
            libc::pthread_mutex_lock(mutex.get());
            libc::pthread_mutex_unlock(mutex.get());
        }
    });
    println!(
        "user API {}: region push+pop {best:.1} ns, mark {mark_best:.1} ns, progress point {progress_best:.1} ns; pthread mutex lock+unlock {lock_best:.1} ns",
        if active {
            "with the strobe runtime"
        } else {
            "without strobe (no-op)"
        }
    );
    Ok(())
}

/// The best of five timings of `n` calls of `f`, in ns per call.
fn best_of_five(n: u64, mut f: impl FnMut(u64)) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t0 = Instant::now();
        for i in 0..n {
            f(black_box(i));
        }
        best = best.min(t0.elapsed().as_nanos() as f64 / n as f64);
    }
    best
}
