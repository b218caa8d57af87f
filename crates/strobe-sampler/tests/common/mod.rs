//! Shared by the sampler tests: the C workload library, a shared segment
//! the tests drain as the collector would, a collecting sink and symbol
//! lookup with `dladdr`.
#![allow(dead_code)]

use std::ffi::{c_void, CStr, CString};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;
use strobe_sampler::{drain_samples, SampleSink, SamplerConfig, TimerConfig};
use strobe_wire::sample::{Sample, TimerClock};
use strobe_wire::segment::{Layout, Segment};

/// A sample as the tests keep it.
#[derive(Debug, Clone)]
pub struct Kept {
    pub tid: i32,
    pub timestamp_ns: u64,
    pub clock: TimerClock,
    pub complete: bool,
    /// Timer expirations the kernel merged into this sample.
    pub overruns: u32,
    pub frames: Vec<u64>,
}

/// Timer expirations behind `samples`: one each, plus those the kernel
/// merged into it. The CPU-time timer is checked at scheduler ticks while
/// its thread runs, so on a busy machine it merges many expirations.
pub fn expirations<'a>(samples: impl IntoIterator<Item = &'a Kept>) -> u64 {
    samples.into_iter().map(|s| 1 + u64::from(s.overruns)).sum()
}

/// Keeps every sample.
#[derive(Default)]
pub struct Collect(pub Vec<Kept>);

impl SampleSink for Collect {
    fn deliver(&mut self, s: &Sample<'_>) {
        self.0.push(Kept {
            tid: s.tid,
            timestamp_ns: s.timestamp_ns,
            clock: s.clock,
            complete: s.complete,
            overruns: s.overruns,
            frames: s.frames.to_vec(),
        });
    }
}

/// A fresh segment with `slots` slots of `sample_ring_bytes` each, leaked
/// as the runtime leaks its own, with both samplers switched on (the tests
/// play the collector).
pub fn segment(slots: u32, sample_ring_bytes: u32) -> &'static Segment {
    let layout = Layout {
        slots,
        sample_ring_bytes,
        event_ring_bytes: 1 << 12,
    };
    // SAFETY: getppid has no preconditions.
    let ppid = unsafe { libc::getppid() };
    let (seg, _fd) = Segment::create(
        layout,
        std::process::id() as i32,
        ppid,
        strobe_core::clock::now_ns(),
        strobe_core::clock::tsc_pair(),
    )
    .expect("creating a segment");
    let seg = seg.leak();
    set_sampling(seg, true, true);
    seg
}

/// As the collector: whether the CPU-time and the real-time samplers take
/// samples now.
pub fn set_sampling(seg: &Segment, cputime: bool, realtime: bool) {
    let on = &seg.header().sampling_on;
    on[0].store(u32::from(cputime), Ordering::SeqCst);
    on[1].store(u32::from(realtime), Ordering::SeqCst);
}

/// As the collector: every sample in `slot`'s ring, oldest first.
pub fn drain(seg: &Segment, slot: u32) -> Vec<Kept> {
    let mut sink = Collect::default();
    drain_samples(&seg.sample_ring(slot), &mut sink).expect("the ring is not corrupt");
    sink.0
}

/// As the collector: every sample in every slot ever claimed.
pub fn drain_all(seg: &Segment) -> Vec<Kept> {
    (0..seg.slots_in_use())
        .flat_map(|slot| drain(seg, slot))
        .collect()
}

/// A slot's counters (shared memory).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub taken: u64,
    pub lost_full: u64,
    pub lost_reentrant: u64,
    pub overruns: u64,
    pub incomplete: u64,
}

pub fn counters(seg: &Segment, slot: u32) -> Counters {
    let s = seg.slot(slot);
    Counters {
        taken: s.taken.load(Ordering::SeqCst),
        lost_full: s.lost_full.load(Ordering::SeqCst),
        lost_reentrant: s.lost_reentrant.load(Ordering::SeqCst),
        overruns: s.overruns.load(Ordering::SeqCst),
        incomplete: s.incomplete.load(Ordering::SeqCst),
    }
}

/// Sums of the counters of every slot ever claimed.
pub fn total_counters(seg: &Segment) -> Counters {
    (0..seg.slots_in_use())
        .map(|slot| counters(seg, slot))
        .fold(Counters::default(), |a, b| Counters {
            taken: a.taken + b.taken,
            lost_full: a.lost_full + b.lost_full,
            lost_reentrant: a.lost_reentrant + b.lost_reentrant,
            overruns: a.overruns + b.overruns,
            incomplete: a.incomplete + b.incomplete,
        })
}

/// A collector thread draining every ring of a segment while the program
/// runs (the producers and it share the rings concurrently).
pub struct Background {
    seg: &'static Segment,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<Kept>>,
}

impl Background {
    pub fn start(seg: &'static Segment) -> Background {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut kept = Vec::new();
                while !stop.load(Ordering::SeqCst) {
                    kept.extend(drain_all(seg));
                    std::thread::sleep(Duration::from_millis(2));
                }
                kept
            })
        };
        Background { seg, stop, thread }
    }

    /// Stops the thread and drains what is left: every sample, oldest
    /// first per thread.
    pub fn finish(self) -> Vec<Kept> {
        self.stop.store(true, Ordering::SeqCst);
        let mut kept = self.thread.join().expect("the collector thread");
        kept.extend(drain_all(self.seg));
        kept
    }
}

/// Two real-time signals for the samplers of this test binary, chosen once.
pub fn signals() -> (i32, i32) {
    static CHOSEN: OnceLock<(i32, i32)> = OnceLock::new();
    *CHOSEN.get_or_init(|| {
        let free = strobe_sampler::signals::free_realtime_signals(2);
        assert_eq!(free.len(), 2, "two free real-time signals");
        (free[0], free[1])
    })
}

/// A sampler configuration for tests: the given timers, this binary's
/// signals.
pub fn config(cputime_hz: Option<f64>, realtime_hz: Option<f64>) -> SamplerConfig {
    let (cpu_signal, real_signal) = signals();
    SamplerConfig {
        cputime: cputime_hz.map(|freq_hz| TimerConfig {
            freq_hz,
            signal: cpu_signal,
        }),
        realtime: realtime_hz.map(|freq_hz| TimerConfig {
            freq_hz,
            signal: real_signal,
        }),
        max_depth: 512,
    }
}

/// Builds `tests/c/workload.c` into a shared library (once per test binary).
pub fn workload_library() -> PathBuf {
    static BUILT: Mutex<Option<PathBuf>> = Mutex::new(None);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = &*built {
        return p.clone();
    }
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/c/workload.c");
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("libworkload-{}.so", std::process::id()));
    let status = std::process::Command::new("cc")
        .args(["-O2", "-fomit-frame-pointer", "-shared", "-fPIC", "-o"])
        .arg(&out)
        .arg(src)
        .status()
        .expect("cc runs");
    assert!(status.success(), "building the workload failed");
    *built = Some(out.clone());
    out
}

/// The loaded workload.
pub struct Workload {
    handle: *mut c_void,
    pub run_split: extern "C" fn(f64, f64, *mut u64, *mut u64),
    pub recurse: extern "C" fn(i32, f64) -> f64,
    pub spin_ms: extern "C" fn(f64) -> f64,
}

// SAFETY: the function pointers and handle are process-wide.
unsafe impl Send for Workload {}
// SAFETY: as above.
unsafe impl Sync for Workload {}

pub fn load_workload() -> Workload {
    let path = CString::new(workload_library().to_str().unwrap()).unwrap();
    // SAFETY: loading a library we just built.
    let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW) };
    assert!(!handle.is_null());
    // As the runtime does after every dlopen.
    strobe_sampler::snapshot::rebuild(None);
    let sym = |name: &str| {
        let name = CString::new(name).unwrap();
        // SAFETY: looking up a symbol in a live handle.
        let p = unsafe { libc::dlsym(handle, name.as_ptr()) };
        assert!(!p.is_null(), "{name:?}");
        p
    };
    // SAFETY: the symbols have these C signatures (tests/c/workload.c).
    unsafe {
        Workload {
            handle,
            run_split: std::mem::transmute::<
                *mut c_void,
                extern "C" fn(f64, f64, *mut u64, *mut u64),
            >(sym("run_split")),
            recurse: std::mem::transmute::<*mut c_void, extern "C" fn(i32, f64) -> f64>(sym(
                "recurse",
            )),
            spin_ms: std::mem::transmute::<*mut c_void, extern "C" fn(f64) -> f64>(sym("spin_ms")),
        }
    }
}

impl Workload {
    /// Spins in the workload, 20 ms of CPU time at a time, until `done`
    /// says so or `limit_ms` of CPU time were spent. Returns whether `done`
    /// said so. (The CPU-time timer is checked at scheduler ticks while
    /// its thread runs: on a busy machine its signals can lag by many
    /// periods, so tests wait for what they need rather than a fixed time.)
    pub fn spin_until(&self, limit_ms: f64, mut done: impl FnMut() -> bool) -> bool {
        let mut spent = 0.0;
        while !done() {
            if spent >= limit_ms {
                return false;
            }
            (self.spin_ms)(20.0);
            spent += 20.0;
        }
        true
    }
}

/// The exported symbol containing `addr`, if any.
pub fn symbol(addr: u64) -> Option<String> {
    // SAFETY: Dl_info is plain old data filled by dladdr.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads loader structures.
    if unsafe { libc::dladdr(addr as *const c_void, &mut info) } == 0 || info.dli_sname.is_null() {
        return None;
    }
    // SAFETY: dli_sname is a NUL-terminated string.
    Some(
        unsafe { CStr::from_ptr(info.dli_sname) }
            .to_string_lossy()
            .into_owned(),
    )
}

/// Symbol of frame `i` of a stack (return addresses looked up at addr - 1).
pub fn frame_symbol(frames: &[u64], i: usize) -> Option<String> {
    symbol(if i == 0 { frames[0] } else { frames[i] - 1 })
}

/// The sampling tests measure real timers on real CPUs, and the handler
/// reads the segment of the sampler started last: they take turns rather
/// than compete.
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

/// Sleeps for `total` in `nanosleep` calls and counts how many a handled
/// signal cut short (`nanosleep` is never restarted, `SA_RESTART` or not).
pub fn sleeps_interrupted(total: Duration) -> u64 {
    let end = std::time::Instant::now() + total;
    let mut interrupted = 0;
    while let Some(left) = end.checked_duration_since(std::time::Instant::now()) {
        let ts = libc::timespec {
            tv_sec: left.as_secs() as libc::time_t,
            tv_nsec: left.subsec_nanos() as libc::c_long,
        };
        // SAFETY: a valid timespec; the remainder is not wanted.
        if unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) } != 0 {
            interrupted += 1;
        }
    }
    interrupted
}
