//! Shared by the sampler tests: the C workload library, a collecting sink
//! and symbol lookup with `dladdr`.
#![allow(dead_code)]

use std::ffi::{c_void, CStr, CString};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;
use strobe_core::timewindow::TimeWindows;
use strobe_sampler::{Sample, SampleSink, SamplerConfig, TimerClock, TimerConfig};

/// A sample as the tests keep it.
#[derive(Debug, Clone)]
pub struct Kept {
    pub tid: i32,
    pub timestamp_ns: u64,
    pub clock: TimerClock,
    pub complete: bool,
    pub frames: Vec<u64>,
}

/// Keeps every sample.
#[derive(Default)]
pub struct Collect(pub Mutex<Vec<Kept>>);

impl SampleSink for Collect {
    fn deliver(&self, s: &Sample<'_>) {
        self.0.lock().unwrap().push(Kept {
            tid: s.tid,
            timestamp_ns: s.timestamp_ns,
            clock: s.clock,
            complete: s.complete,
            frames: s.frames.to_vec(),
        });
    }
}

impl Collect {
    pub fn take(&self) -> Vec<Kept> {
        std::mem::take(&mut self.0.lock().unwrap())
    }
}

/// Builds `tests/c/workload.c` into a shared library (once per test binary).
pub fn workload_library() -> PathBuf {
    static BUILT: Mutex<Option<PathBuf>> = Mutex::new(None);
    let mut built = BUILT.lock().unwrap();
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

/// A sampler configuration for tests: the given timers, small settings.
pub fn config(cputime_hz: Option<f64>, realtime_hz: Option<f64>) -> SamplerConfig {
    let timer = |hz: f64, signal: i32| TimerConfig {
        freq_hz: hz,
        delay_ns: 0,
        duration_ns: 0,
        signal,
    };
    SamplerConfig {
        cputime: cputime_hz.map(|hz| timer(hz, libc::SIGPROF)),
        realtime: realtime_hz.map(|hz| timer(hz, libc::SIGRTMIN() + 4)),
        max_depth: 512,
        buffer_samples: 1024,
        allocator_size: 8,
        temp_dir: None,
        windows: TimeWindows::default(),
        poll_interval: Duration::from_millis(10),
    }
}

/// The sampling tests measure real timers on real CPUs: they take turns
/// rather than compete for the machine's cores.
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}
