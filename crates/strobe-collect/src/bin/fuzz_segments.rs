//! `fuzz_segments`: fuzzes the collector's decoders of a program's
//! segment (`strobe_collect::fuzz`), and makes its corpus.
//!
//! ```text
//! fuzz_segments capture RUNTIME OUT_DIR NAME -- PROGRAM ARGS...
//!     runs PROGRAM under RUNTIME and keeps every segment it handed over
//! fuzz_segments run CORPUS_DIR CRASH_DIR SECONDS [SEED]
//!     mutates the corpus for SECONDS of this process's CPU time; every
//!     input that panicked, took longer than 10 s or grew memory past
//!     4 GiB goes to CRASH_DIR (the last two end the run); prints the
//!     cases run, the CPU seconds and the peak memory
//! fuzz_segments replay FILE...
//!     runs each file as it is and with racing changes
//! ```
//!
//! Exit status: 0 when nothing was found, 1 when something was, 2 for
//! bad arguments. Built with the workspace's `fuzz` profile (release
//! speed, overflow checks and debug assertions on) for long runs.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use strobe_collect::fuzz::{capture_segments, corpus, mutate, pack, survives, unpack, Rng};

/// A case running longer than this is a hang.
const HANG: Duration = Duration::from_secs(10);
/// Peak memory past this is unbounded allocation.
const MAX_RSS_KB: u64 = 4 << 20;

fn usage() -> ! {
    eprintln!(
        "usage: fuzz_segments capture RUNTIME OUT_DIR NAME -- PROGRAM ARGS...\n       \
         fuzz_segments run CORPUS_DIR CRASH_DIR SECONDS [SEED]\n       \
         fuzz_segments replay FILE..."
    );
    std::process::exit(2)
}

fn main() {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let text = |i: usize| {
        args.get(i)
            .and_then(|a| a.to_str())
            .unwrap_or_else(|| usage())
    };
    let code = match args.first().and_then(|a| a.to_str()) {
        Some("capture") if args.len() >= 6 && args[4] == "--" => {
            let written = capture_segments(
                Path::new(&args[1]),
                &args[5..],
                Path::new(&args[2]),
                text(3),
                Duration::from_secs(120),
            );
            match written {
                Ok(files) => {
                    for f in files {
                        println!("{}", f.display());
                    }
                    0
                }
                Err(e) => {
                    eprintln!("fuzz_segments: capture failed: {e}");
                    1
                }
            }
        }
        Some("run") if args.len() >= 4 => {
            let seconds: f64 = text(3).parse().unwrap_or_else(|_| usage());
            let seed = args
                .get(4)
                .map(|s| {
                    s.to_str()
                        .and_then(|s| s.parse().ok())
                        .unwrap_or_else(|| usage())
                })
                .unwrap_or_else(strobe_core::clock::now_ns);
            fuzz(Path::new(&args[1]), Path::new(&args[2]), seconds, seed)
        }
        Some("replay") if args.len() >= 2 => replay(&args[1..]),
        _ => usage(),
    };
    std::process::exit(code)
}

/// This process's CPU time in seconds.
fn cpu_seconds() -> f64 {
    strobe_core::clock::read_clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID) as f64 / 1e9
}

/// Peak resident memory of this process in KiB.
fn peak_rss_kb() -> u64 {
    // SAFETY: rusage is plain old data filled by getrusage.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    usage.ru_maxrss.max(0) as u64
}

/// Keeps the message of the last panic (the default hook would print
/// every caught one).
fn quiet_panics() -> Arc<std::sync::Mutex<String>> {
    let last = Arc::new(std::sync::Mutex::new(String::new()));
    let keep = last.clone();
    std::panic::set_hook(Box::new(move |info| {
        *keep.lock().unwrap_or_else(|e| e.into_inner()) = info.to_string();
    }));
    last
}

fn fuzz(corpus_dir: &Path, crashes: &Path, seconds: f64, seed: u64) -> i32 {
    let inputs = corpus(corpus_dir);
    if inputs.is_empty() {
        eprintln!(
            "fuzz_segments: no packed segment in {}",
            corpus_dir.display()
        );
        return 2;
    }
    if let Err(e) = std::fs::create_dir_all(crashes) {
        eprintln!("fuzz_segments: cannot create {}: {e}", crashes.display());
        return 2;
    }
    let last_panic = quiet_panics();
    let Some(work) = work_dir() else {
        return 2;
    };
    // The watchdog: a case that runs past HANG, or memory past the
    // bound, is saved and ends the run.
    let started_case = Arc::new(AtomicU64::new(0));
    let case_bytes = Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    {
        let (started_case, case_bytes, crashes) = (
            started_case.clone(),
            case_bytes.clone(),
            crashes.to_path_buf(),
        );
        std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_millis(200));
            let since = started_case.load(Ordering::Relaxed);
            let hung = since != 0
                && strobe_core::clock::now_ns().saturating_sub(since) > HANG.as_nanos() as u64;
            let bloated = peak_rss_kb() > MAX_RSS_KB;
            if hung || bloated {
                let what = if hung { "hang" } else { "memory" };
                let bytes = case_bytes.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let path = crashes.join(format!("{what}-{:016x}.seg", hash(&bytes)));
                let _ = std::fs::write(&path, pack(&bytes));
                eprintln!("fuzz_segments: {what}: saved {}", path.display());
                std::process::exit(1);
            }
        });
    }
    let mut rng = Rng::new(seed);
    let (start_cpu, mut cases, mut found) = (cpu_seconds(), 0u64, 0u64);
    let wall = Instant::now();
    while cpu_seconds() - start_cpu < seconds {
        let (_, base) = &inputs[rng.below(inputs.len())];
        let mut bytes = base.clone();
        mutate(&mut bytes, &mut rng);
        *case_bytes.lock().unwrap_or_else(|e| e.into_inner()) = bytes.clone();
        let race_seed = (rng.below(4) == 0).then(|| rng.next_u64());
        started_case.store(strobe_core::clock::now_ns(), Ordering::Relaxed);
        let result = survives(&bytes, work.path(), race_seed);
        started_case.store(0, Ordering::Relaxed);
        cases += 1;
        if let Err(message) = result {
            found += 1;
            let path = crashes.join(format!("panic-{:016x}.seg", hash(&bytes)));
            let _ = std::fs::write(&path, pack(&bytes));
            let location = last_panic.lock().unwrap_or_else(|e| e.into_inner()).clone();
            eprintln!(
                "fuzz_segments: panic ({message}): saved {}\n  {location}",
                path.display()
            );
        }
    }
    println!(
        "cases {cases}, CPU {:.1} s, wall {:.1} s, peak memory {} MiB, seed {seed}, found {found}",
        cpu_seconds() - start_cpu,
        wall.elapsed().as_secs_f64(),
        peak_rss_kb() / 1024
    );
    i32::from(found > 0)
}

fn replay(files: &[OsString]) -> i32 {
    let last_panic = quiet_panics();
    let Some(work) = work_dir() else {
        return 2;
    };
    let mut failed = 0;
    for f in files {
        let Some(bytes) = std::fs::read(f).ok().and_then(|b| unpack(&b)) else {
            eprintln!(
                "fuzz_segments: {}: not a packed segment",
                Path::new(f).display()
            );
            failed += 1;
            continue;
        };
        match survives(&bytes, work.path(), Some(1)) {
            Ok(()) => println!("{}: survived", Path::new(f).display()),
            Err(message) => {
                failed += 1;
                let location = last_panic.lock().unwrap_or_else(|e| e.into_inner()).clone();
                println!("{}: PANIC {message}\n  {location}", Path::new(f).display());
            }
        }
    }
    i32::from(failed > 0)
}

/// A temporary directory for the databases the cases write (`None`,
/// said, when it cannot be made).
fn work_dir() -> Option<TempDir> {
    let path = std::env::temp_dir().join(format!("fuzz-segments-{}", std::process::id()));
    match std::fs::create_dir_all(&path) {
        Ok(()) => Some(TempDir(path)),
        Err(e) => {
            eprintln!("fuzz_segments: cannot create {}: {e}", path.display());
            None
        }
    }
}

struct TempDir(PathBuf);

impl TempDir {
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// FNV-1a of `bytes`, to name saved inputs.
fn hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
