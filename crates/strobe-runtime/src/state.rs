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
use std::sync::Arc;
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
}

static CURRENT: AtomicPtr<Runtime> = AtomicPtr::new(ptr::null_mut());

/// The runtime, if stage 2 ran and it was not finalized.
pub fn current() -> Option<&'static Runtime> {
    let p = CURRENT.load(Ordering::Acquire);
    // SAFETY: runtimes are leaked, never freed: a published pointer stays valid.
    let rt = unsafe { p.as_ref() }?;
    (!rt.finalized.load(Ordering::Acquire)).then_some(rt)
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
    let rt = Box::leak(Box::new(Runtime {
        settings,
        sampler,
        recorder,
        tracing,
        own_text: own_text(),
        finalized: AtomicBool::new(false),
    }));
    CURRENT.store(rt, Ordering::Release);
    crate::threads::on_thread_start(rt, None);
    crate::threads::adopt_threads(rt, &older_threads);
    log_at!(1, "profiling into {}", rt.recorder.path().display());
}

/// Stops every producer, writes everything collected and closes the
/// database. Idempotent; later calls do nothing.
pub fn finalize(reason: &str) {
    let Some(rt) = current() else {
        return;
    };
    if rt.finalized.swap(true, Ordering::AcqRel) {
        return;
    }
    crate::threads::on_thread_exit(rt);
    let stats = rt.sampler.as_ref().map(Sampler::stop);
    match rt.recorder.finish(stats) {
        Ok(summary) => log_at!(1, "{reason}: {summary}"),
        Err(e) => crate::log::emit(&format!("{reason}: could not finish the profile: {e}")),
    }
}

/// In a forked child: forget the parent's runtime without touching it.
pub fn abandon_after_fork() {
    CURRENT.store(ptr::null_mut(), Ordering::Release);
}
