// rust_threads: the main thread and a spawned thread each burn 0.3 s of
// their own CPU time (measured on the thread's CPU clock, so a busy
// machine does not shorten it). Rust's std gives every thread a small
// alternate signal stack (about 8 KiB): a sampling handler must not run
// on it.

#[repr(C)]
struct Timespec {
    sec: i64,
    nsec: i64,
}

extern "C" {
    fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
}

/// CLOCK_THREAD_CPUTIME_ID.
const THREAD_CPU: i32 = 3;

fn thread_cpu_seconds() -> f64 {
    let mut ts = Timespec { sec: 0, nsec: 0 };
    // SAFETY: clock_gettime writes one timespec through the pointer.
    unsafe { clock_gettime(THREAD_CPU, &mut ts) };
    ts.sec as f64 + ts.nsec as f64 * 1e-9
}

fn burn(seconds: f64) -> f64 {
    let end = thread_cpu_seconds() + seconds;
    let mut x = 1.0f64;
    while thread_cpu_seconds() < end {
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
