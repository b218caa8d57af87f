// rust_threads: the main thread and a spawned thread each burn about 0.3 s
// of CPU. Rust's std gives every thread a small alternate signal stack
// (about 8 KiB): a sampling handler must not run on it.
use std::time::{Duration, Instant};

fn burn(seconds: f64) -> f64 {
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let mut x = 1.0f64;
    while Instant::now() < end {
        for i in 0..1000 {
            x = x * 1.0000001 + 0.5 / (x + i as f64);
        }
    }
    x
}

fn main() {
    let worker = std::thread::spawn(|| burn(0.3));
    let a = burn(0.3);
    let b = worker.join().unwrap();
    println!("done {}", a > 0.0 && b > 0.0);
}
