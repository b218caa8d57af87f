//! The runtime of this process: its configuration, segment and sampler,
//! held behind one atomic pointer.
//!
//! Owns creation (stage 2 of start-up, and again in a forked child) and
//! lookup. A forked child replaces the pointer with a fresh runtime and a
//! segment of its own, and abandons the parent's (its threads do not exist
//! in the child, so its locks are never touched). Runtimes are leaked,
//! never freed. Never used from a signal handler except through
//! [`current`], which is a single atomic load (the sampler's counter hook,
//! `sample_counters`, is that load and the counters' own handler code).

use crate::counters::ProcessCounters;
use crate::strings::Strings;
use std::ops::Range;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use strobe_sampler::{Sampler, SamplerConfig, TimerConfig};
use strobe_wire::config::RuntimeConfig;
use strobe_wire::segment::Segment;

/// Everything the runtime runs in this process.
pub struct Runtime {
    /// What the launcher resolved.
    pub config: RuntimeConfig,
    /// This process's shared segment.
    pub segment: &'static Segment,
    /// The sampler, when sampling is on.
    pub sampler: Option<Sampler>,
    /// The address range of this library's code: threads whose start
    /// routine lies here are strobe's own (tool plugins) and not sampled.
    pub own_text: Range<u64>,
    /// Distinguishes this runtime from earlier ones in the same address
    /// space (thread-local caches of a forked child's parent).
    pub generation: u64,
    /// Interned region and marker names.
    pub strings: Strings,
    /// Module history entries already announced to the collector.
    pub announced_modules: AtomicUsize,
    /// Regions and markers are not recorded while paused.
    pub paused: AtomicBool,
    /// The process this runtime belongs to. A `vfork` child shares the
    /// parent's memory, and so its runtime pointer, but must never act on it.
    pub pid: i32,
    /// The per-thread counters (`sampling_events`); `None` when none was
    /// requested.
    pub counters: Option<ProcessCounters>,
}

static CURRENT: AtomicPtr<Runtime> = AtomicPtr::new(ptr::null_mut());
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The runtime, if one is running.
#[inline]
pub fn current() -> Option<&'static Runtime> {
    let p = CURRENT.load(Ordering::Acquire);
    // SAFETY: runtimes are leaked, never freed: a published pointer stays valid.
    unsafe { p.as_ref() }
}

/// The runtime, if it belongs to the calling process: `None` in a `vfork`
/// child, which shares the parent's memory (glibc's `getpid` is a real
/// system call, so it answers for the child).
pub fn owned() -> Option<&'static Runtime> {
    // SAFETY: getpid has no preconditions.
    current().filter(|rt| rt.pid == unsafe { libc::getpid() })
}

/// The sampler's counter hook: the current runtime's counter values for
/// a sample of `slot`'s thread. **Runs inside the sampling signal
/// handler**: one atomic load here, then [`crate::counters::sample_values`]
/// (no allocation, no lock, no formatting).
fn sample_counters(slot: u32, out: &mut [u64]) {
    crate::counters::sample_values(current().and_then(|rt| rt.counters.as_ref()), slot, out);
}

/// This library's executable range (looked up once: a forked child has it
/// at the same place).
fn own_text() -> Range<u64> {
    static OWN_TEXT: OnceLock<Range<u64>> = OnceLock::new();
    OWN_TEXT
        .get_or_init(|| {
            let here = own_text as fn() -> Range<u64> as usize as u64;
            strobe_core::modules::loaded_modules()
                .into_iter()
                .find(|m| m.text.contains(&here))
                .map_or(0..0, |m| m.text)
        })
        .clone()
}

/// The sampler's configuration: the configured signals, or free real-time
/// signals of this process.
fn sampler_config(config: &RuntimeConfig) -> Result<SamplerConfig, String> {
    let wanted = [
        (config.cputime_hz, config.cputime_signal),
        (config.realtime_hz, config.realtime_signal),
    ];
    let needed = wanted
        .iter()
        .filter(|(hz, sig)| *hz > 0.0 && *sig == 0)
        .count();
    let mut free = strobe_sampler::signals::free_realtime_signals(needed).into_iter();
    let mut timers = [None, None];
    for (i, (hz, signal)) in wanted.into_iter().enumerate() {
        if hz <= 0.0 {
            continue;
        }
        let signal = if signal == 0 {
            free.next().ok_or("no free real-time signal for sampling")?
        } else {
            signal
        };
        timers[i] = Some(TimerConfig {
            freq_hz: hz,
            signal,
        });
    }
    Ok(SamplerConfig {
        cputime: timers[0],
        realtime: timers[1],
        max_depth: config.max_depth as usize,
    })
}

/// Builds and publishes the runtime for this process around `segment`.
pub fn publish(config: RuntimeConfig, segment: &'static Segment) -> &'static Runtime {
    let counters = ProcessCounters::new(&config.counters, config.layout.slots);
    // Before any thread registers: every sample carries the values.
    match &counters {
        Some(c) => strobe_sampler::set_sample_counters(c.len(), Some(sample_counters)),
        None => strobe_sampler::set_sample_counters(0, None),
    }
    let sampler = if config.cputime_hz > 0.0 || config.realtime_hz > 0.0 {
        match sampler_config(&config)
            .and_then(|c| Sampler::start(c, segment).map_err(|e| e.to_string()))
        {
            Ok(s) => Some(s),
            Err(e) => {
                crate::log::emit(&format!("sampling is off: {e}"));
                None
            }
        }
    } else {
        None
    };
    let rt: &'static Runtime = Box::leak(Box::new(Runtime {
        config,
        segment,
        sampler,
        own_text: own_text(),
        generation: GENERATION.fetch_add(1, Ordering::Relaxed) + 1,
        strings: Strings::default(),
        announced_modules: AtomicUsize::new(0),
        paused: AtomicBool::new(false),
        // SAFETY: getpid has no preconditions.
        pid: unsafe { libc::getpid() },
        counters,
    }));
    CURRENT.store(rt as *const Runtime as *mut Runtime, Ordering::Release);
    rt
}

/// In a forked child: forget the parent's runtime without touching its
/// locks, and stop its samplers (returned for the child's runtime to
/// reuse).
pub fn abandon_after_fork(parent: &Runtime) -> Option<strobe_sampler::Spare> {
    CURRENT.store(ptr::null_mut(), Ordering::Release);
    parent.sampler.as_ref().map(Sampler::abandon_after_fork)
}

/// Runtimes for the tests of this crate: never published (the test
/// binary's interposed functions keep forwarding), each with a small
/// segment of its own, no sampler and no counters.
#[cfg(test)]
pub mod testing {
    use super::*;
    use strobe_wire::record::{decode_event, EventHead};
    use strobe_wire::segment::Layout;

    /// Four slots with the smallest rings.
    pub const SMALL: Layout = Layout {
        slots: 4,
        sample_ring_bytes: 4096,
        event_ring_bytes: 4096,
    };

    /// A runtime with `config` (its layout is the segment's).
    pub fn runtime(config: RuntimeConfig) -> &'static Runtime {
        // SAFETY: getpid/getppid have no preconditions.
        let (pid, ppid) = unsafe { (libc::getpid(), libc::getppid()) };
        let (segment, _fd) = Segment::create(config.layout, pid, ppid, 1, (0, 0)).unwrap();
        Box::leak(Box::new(Runtime {
            config,
            segment: segment.leak(),
            sampler: None,
            own_text: 0..0,
            generation: GENERATION.fetch_add(1, Ordering::Relaxed) + 1,
            strings: Strings::default(),
            announced_modules: AtomicUsize::new(0),
            paused: AtomicBool::new(false),
            pid,
            counters: None,
        }))
    }

    /// A runtime with a [`SMALL`] segment and otherwise the defaults
    /// (lossless, no time-stamp counter).
    pub fn small() -> &'static Runtime {
        runtime(RuntimeConfig {
            layout: SMALL,
            ..RuntimeConfig::default()
        })
    }

    /// What the collector would copy out of `slot`'s event ring now, each
    /// record decoded as the collector decodes it.
    pub fn events(rt: &Runtime, slot: u32) -> Vec<(EventHead, Vec<u8>)> {
        let mut out = Vec::new();
        rt.segment
            .event_ring(slot)
            .drain(|payload| {
                let e = decode_event(payload).expect("a whole event head");
                out.push((e.head, e.bytes.to_vec()));
            })
            .expect("an intact ring");
        out
    }
}
