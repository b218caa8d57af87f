//! The runtime of this process: its settings, sampler and recorder, held
//! behind one atomic pointer.
//!
//! Owns creation (stage 2 of start-up, and again in a forked child),
//! lookup, and finalization. A forked child replaces the pointer with a
//! fresh runtime and abandons the parent's (its threads do not exist in the
//! child, so its locks must never be touched). Never used from a signal
//! handler except through [`current`], which is a single atomic load.

use crate::log::log_at;
use crate::recorder::Recorder;
use std::ops::Range;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use strobe_core::settings::{Key, Settings};
use strobe_sampler::{Sampler, SamplerConfig};

/// Everything the runtime runs in this process.
pub struct Runtime {
    /// The resolved settings.
    pub settings: Settings,
    /// The sampler, when sampling is on.
    pub sampler: Option<Sampler>,
    /// Where samples, regions and threads go.
    pub recorder: Arc<Recorder>,
    /// Regions and markers, when `use_tracing` is on.
    pub tracing: Option<crate::tracing::Tracing>,
    /// The address range of this library's code: threads whose start
    /// routine lies here are strobe's own and are not sampled.
    pub own_text: Range<u64>,
    finalized: AtomicBool,
    ticker: Mutex<Option<JoinHandle<()>>>,
    ticker_stop: AtomicBool,
    /// Wakes the ticker (stop, emergency flush).
    wake_fd: i32,
    /// The ticker's answer to an emergency flush.
    done_fd: i32,
    /// Tool plugins were loaded by this runtime (not inherited through
    /// `fork`, whose buffers belong to the parent).
    tools_loaded: AtomicBool,
    /// The process this runtime belongs to. A `vfork` child shares the
    /// parent's memory, and so its runtime pointer, but must never act on it.
    pid: i32,
}

static CURRENT: AtomicPtr<Runtime> = AtomicPtr::new(ptr::null_mut());

/// The runtime, if stage 2 ran and it was not finalized.
pub fn current() -> Option<&'static Runtime> {
    let p = CURRENT.load(Ordering::Acquire);
    // SAFETY: runtimes are leaked, never freed: a published pointer stays valid.
    let rt = unsafe { p.as_ref() }?;
    (!rt.finalized.load(Ordering::Acquire)).then_some(rt)
}

/// The runtime, if it belongs to the calling process: `None` in a `vfork`
/// child, which shares the parent's memory (glibc's `getpid` is a real
/// system call, so it answers for the child).
pub fn owned() -> Option<&'static Runtime> {
    // SAFETY: getpid has no preconditions.
    current().filter(|rt| rt.pid == unsafe { libc::getpid() })
}

/// This library's executable range.
fn own_text() -> Range<u64> {
    let here = own_text as fn() -> Range<u64> as usize as u64;
    strobe_sampler::modules::loaded_modules()
        .into_iter()
        .find(|m| m.text.contains(&here))
        .map_or(0..0, |m| m.text)
}

/// Builds and publishes the runtime for this process (stage 2 of start-up,
/// or a forked child). The calling thread is registered and sampled.
pub fn start(settings: Settings) {
    let older_threads = crate::threads::other_threads();
    let recorder = match Recorder::open(&settings) {
        Ok(r) => Arc::new(r),
        Err(e) => {
            crate::log::emit(&format!("profiling is off for this process: {e}"));
            return;
        }
    };
    let sampler = if settings.bool(Key::UseSampling) {
        match Sampler::start(SamplerConfig::from_settings(&settings), recorder.clone()) {
            Ok(s) => Some(s),
            Err(e) => {
                crate::log::emit(&format!("sampling is off: {e}"));
                None
            }
        }
    } else {
        None
    };
    let tracing = if settings.bool(Key::UseTracing) {
        crate::tracing::Tracing::start()
            .map_err(|e| crate::log::emit(&format!("regions are off: {e}")))
            .ok()
    } else {
        None
    };
    // SAFETY: eventfd has no memory preconditions.
    let (wake_fd, done_fd) = unsafe {
        (
            libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK),
            libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK),
        )
    };
    let tools = settings.list(Key::ToolLib).join(":");
    let rt: &'static Runtime = Box::leak(Box::new(Runtime {
        settings,
        sampler,
        recorder,
        tracing,
        own_text: own_text(),
        finalized: AtomicBool::new(false),
        ticker: Mutex::new(None),
        ticker_stop: AtomicBool::new(false),
        wake_fd,
        done_fd,
        tools_loaded: AtomicBool::new(false),
        // SAFETY: getpid has no preconditions.
        pid: unsafe { libc::getpid() },
    }));
    CURRENT.store(rt as *const Runtime as *mut Runtime, Ordering::Release);
    if !tools.is_empty() {
        let report = strobe_buffer::tool::load_list(&tools);
        rt.tools_loaded
            .store(!report.loaded.is_empty(), Ordering::SeqCst);
    }
    match std::thread::Builder::new()
        .name("strobe-ticker".into())
        .spawn(move || ticker(rt))
    {
        Ok(handle) => *rt.ticker.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle),
        Err(e) => crate::log::emit(&format!("no periodic flush: {e}")),
    }
    crate::recorder::EMERGENCY_REQUEST.store(wake_fd, Ordering::SeqCst);
    crate::recorder::EMERGENCY_DONE.store(done_fd, Ordering::SeqCst);
    crate::threads::on_thread_start(rt, None);
    crate::threads::adopt_threads(rt, &older_threads);
    log_at!(1, "profiling into {}", rt.recorder.path().display());
}

/// Moves trace notifications into the buffer.
fn drain_tracing(rt: &Runtime, scratch: &mut Vec<strobe_trace::recorder::TraceRecord>) {
    if let Some(t) = &rt.tracing {
        scratch.clear();
        t.recorder.drain(scratch);
        rt.recorder.trace_records(scratch);
    }
}

/// The ticker thread: every 50 ms moves trace notifications into the
/// buffer; every `flush_interval` (or at once when a fatal signal asks)
/// delivers the buffer and commits the database.
fn ticker(rt: &'static Runtime) {
    let interval = rt.settings.duration_ns(Key::FlushInterval).max(1);
    let mut last_flush = strobe_core::clock::now_ns();
    let mut scratch = Vec::new();
    loop {
        let mut pfd = libc::pollfd {
            fd: rt.wake_fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut pfd, 1, 50) };
        let mut woken = 0u64;
        // SAFETY: reading 8 bytes from our eventfd into a local.
        let n = unsafe { libc::read(rt.wake_fd, &mut woken as *mut u64 as *mut libc::c_void, 8) };
        if rt.ticker_stop.load(Ordering::SeqCst) {
            return;
        }
        drain_tracing(rt, &mut scratch);
        let now = strobe_core::clock::now_ns();
        if n == 8 || now - last_flush >= interval {
            rt.recorder.flush();
            last_flush = now;
        }
        if n == 8 {
            let one = 1u64;
            // SAFETY: 8 bytes to our eventfd.
            unsafe { libc::write(rt.done_fd, &one as *const u64 as *const libc::c_void, 8) };
        }
    }
}

fn stop_ticker(rt: &Runtime) {
    rt.ticker_stop.store(true, Ordering::SeqCst);
    let one = 1u64;
    // SAFETY: 8 bytes to our eventfd.
    unsafe { libc::write(rt.wake_fd, &one as *const u64 as *const libc::c_void, 8) };
    if let Some(handle) = rt.ticker.lock().unwrap_or_else(|e| e.into_inner()).take() {
        let _ = handle.join();
    }
}

/// Stops every producer, writes everything collected and closes the
/// database. Idempotent; later calls do nothing.
pub fn finalize(reason: &str) {
    let Some(rt) = owned() else {
        return;
    };
    if rt.finalized.swap(true, Ordering::AcqRel) {
        return;
    }
    crate::threads::on_thread_exit(rt);
    let stats = rt.sampler.as_ref().map(Sampler::stop);
    stop_ticker(rt);
    drain_tracing(rt, &mut Vec::new());
    if let Some(t) = &rt.tracing {
        let dropped = t.recorder.dropped();
        if dropped > 0 {
            crate::log::emit(&format!(
                "{dropped} region/marker records were dropped: a thread produced them faster than they were collected"
            ));
        }
    }
    match rt.recorder.finish(stats) {
        Ok(summary) => log_at!(1, "{reason}: {summary}"),
        Err(e) => crate::log::emit(&format!("{reason}: could not finish the profile: {e}")),
    }
    if rt.tools_loaded.load(Ordering::SeqCst) {
        strobe_buffer::tool::finalize();
    }
}

/// In a forked child: forget the parent's runtime without touching it, and
/// stop the parent's buffers from receiving records (their delivery
/// threads do not exist here).
pub fn abandon_after_fork() {
    CURRENT.store(ptr::null_mut(), Ordering::Release);
    crate::recorder::EMERGENCY_REQUEST.store(-1, Ordering::SeqCst);
    crate::recorder::EMERGENCY_DONE.store(-1, Ordering::SeqCst);
    strobe_buffer::dispatch::forget_contexts_after_fork();
}
