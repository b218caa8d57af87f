//! Profiling probe (run under `perf record`): unique and repeated trace-point
//! creation and string lookup in tight loops, timed by thread CPU time.
//! `ONLY_UNIQUE=1` stops after the unique-creation phase.
use std::hint::black_box;
use strobe_trace::{Framework, PayloadSpec};
fn main() {
    let n = 1000;
    let names: Vec<String> = (0..n).map(|i| format!("function_{i}")).collect();
    let files: Vec<String> = (0..100)
        .map(|i| format!("src/module_{i}/file_{i}.cpp"))
        .collect();
    let un = 200_000;
    let unames: Vec<String> = (0..un).map(|i| format!("function_{i}")).collect();
    let fw = Framework::new();
    let t = cpu();
    for (i, n) in unames.iter().enumerate() {
        black_box(
            fw.make_event(&PayloadSpec::at(n, &files[i % 100], i as u32, 1), 1, 1)
                .unwrap(),
        );
    }
    println!("unique: {:.2} ns", (cpu() - t) as f64 / un as f64);
    let fw = Framework::new();
    let spec =
        |i: usize| PayloadSpec::at(&names[i], &files[i % 100], i as u32 + 1, (i % 80) as u32);
    for i in 0..n {
        fw.make_event(&spec(i), 1, 1).unwrap();
    }
    if std::env::var_os("ONLY_UNIQUE").is_some() {
        return;
    }
    let iters = 20_000_000;
    let t = cpu();
    for k in 0..iters {
        black_box(fw.make_event(&spec((k * 7) % n), 1, 1).unwrap());
    }
    println!("repeated: {:.2} ns", (cpu() - t) as f64 / iters as f64);
    let t = cpu();
    for k in 0..iters {
        black_box(fw.strings().find(names[(k * 7) % n].as_bytes()));
    }
    println!("string find: {:.2} ns", (cpu() - t) as f64 / iters as f64);
}
fn cpu() -> u64 {
    strobe_core::clock::read_clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}
