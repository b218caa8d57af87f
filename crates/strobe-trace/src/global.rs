//! The process-wide framework the C ABI and instrumented code share, the
//! environment rules that configure it, and the one-load enabled check.
//!
//! Owns the global instance pointer (its enabled state is mirrored in
//! `enabled_mirror`, which the instance itself keeps current). A replaced
//! instance (after [`reset_global`]) is leaked, never freed: C code may still
//! hold its events. It must never load subscribers while holding a lock.

use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::Arc;

use crate::enabled_mirror::mirrored_enabled;
use crate::framework::{EnablePolicy, Framework};
use crate::subscriber::{parse_subscriber_list, DylibSubscriber};

/// Environment variable that turns tracing on or off.
pub const ENV_TRACE_ENABLE: &str = "XPTI_TRACE_ENABLE";
/// Environment variable naming subscriber libraries (comma-separated).
pub const ENV_SUBSCRIBERS: &str = "XPTI_SUBSCRIBERS";
/// Environment variable naming the dispatcher a proxy loads.
pub const ENV_DISPATCHER: &str = "XPTI_FRAMEWORK_DISPATCHER";

/// The `XPTI_SUBSCRIBERS` entry that attaches the built-in printer
/// subscriber (writes one line per notification to stderr).
pub const BUILTIN_PRINTER: &str = "strobe:printer";

static GLOBAL: AtomicPtr<Framework> = AtomicPtr::new(std::ptr::null_mut());
/// Set by [`skip_env_subscribers`].
static SKIP_ENV_SUBSCRIBERS: AtomicBool = AtomicBool::new(false);

/// Interprets an `XPTI_TRACE_ENABLE` value (REFERENCE §2): unset → on;
/// `1` / `true` → on; `0` / `false` → off; anything else → off.
pub fn parse_trace_enable(value: Option<&str>) -> bool {
    match value {
        None => true,
        Some(v) => matches!(v.trim(), "1" | "true"),
    }
}

/// `XPTI_TRACE_ENABLE` as read from this process's environment.
pub fn env_trace_enable() -> bool {
    let v = std::env::var_os(ENV_TRACE_ENABLE);
    parse_trace_enable(v.as_deref().map(|s| s.to_str().unwrap_or("<non-utf8>")))
}

/// Whether the global framework has tracing on (`xptiTraceEnabled`).
///
/// One relaxed atomic load once the global exists; the first call creates
/// it (reading the environment and loading subscribers).
#[inline(always)]
pub fn trace_enabled() -> bool {
    match mirrored_enabled() {
        Some(on) => on,
        None => trace_enabled_slow(),
    }
}

#[cold]
fn trace_enabled_slow() -> bool {
    global().is_enabled()
}

/// The process-wide framework, created on first use with
/// [`EnablePolicy::EnvAndSubscribers`]; the libraries named in
/// `XPTI_SUBSCRIBERS` are loaded then (each rejected one is reported on
/// stderr with its path and the reason); the entry [`BUILTIN_PRINTER`]
/// attaches the built-in printer instead of a library.
#[inline]
pub fn global() -> &'static Framework {
    let p = GLOBAL.load(Ordering::Acquire);
    if !p.is_null() {
        // SAFETY: a published global is never freed (see module docs).
        return unsafe { &*p };
    }
    global_slow()
}

#[cold]
fn global_slow() -> &'static Framework {
    let fw = Box::into_raw(Box::new(Framework::with_policy(
        EnablePolicy::EnvAndSubscribers {
            env_allows: env_trace_enable(),
        },
    )));
    match GLOBAL.compare_exchange(
        std::ptr::null_mut(),
        fw,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) => {
            // SAFETY: just published; never freed.
            let g = unsafe { &*fw };
            g.mirrors_global.store(true, Ordering::Relaxed);
            g.recompute_enabled();
            load_env_subscribers(g);
            g
        }
        Err(existing) => {
            // SAFETY: `fw` was never shared; `existing` is published forever.
            drop(unsafe { Box::from_raw(fw) });
            // SAFETY: as above.
            unsafe { &*existing }
        }
    }
}

/// The global framework, once created, will not load the libraries named
/// in `XPTI_SUBSCRIBERS`: for a copy of this crate that is not the
/// program's dispatcher (strobe's preloaded runtime has one of its own,
/// and must not load the program's subscribers into it, itself included).
/// Call before the first [`global`]; later calls change nothing.
pub fn skip_env_subscribers() {
    SKIP_ENV_SUBSCRIBERS.store(true, Ordering::Relaxed);
}

fn load_env_subscribers(g: &Framework) {
    if SKIP_ENV_SUBSCRIBERS.load(Ordering::Relaxed) {
        return;
    }
    let Some(list) = std::env::var_os(ENV_SUBSCRIBERS) else {
        return;
    };
    let list = list.to_string_lossy().into_owned();
    for path in parse_subscriber_list(&list) {
        if path.as_os_str() == BUILTIN_PRINTER {
            g.add_subscriber(Arc::new(crate::printer::Printer::stderr()));
            continue;
        }
        match DylibSubscriber::load(&path) {
            Ok(s) => g.add_subscriber(Arc::new(s)),
            Err(e) => eprintln!("strobe-trace: warning: {e} (from {ENV_SUBSCRIBERS})"),
        }
    }
}

/// Replaces the global framework with an empty one (`xptiReset`, for
/// tests): strings, payloads, events, streams and callbacks start over; the
/// subscribers and a forced enable state carry over. The old instance is
/// leaked so pointers into it stay valid.
pub fn reset_global() {
    let old = global();
    let fresh = Box::new(Framework::with_policy(old.policy()));
    for s in old.subscribers_snapshot() {
        fresh.push_subscriber_quiet(s);
    }
    fresh.set_forced_state(old.forced_state());
    let fresh = Box::into_raw(fresh);
    old.mirrors_global.store(false, Ordering::Relaxed);
    GLOBAL.store(fresh, Ordering::Release);
    // SAFETY: just published; never freed.
    let g = unsafe { &*fresh };
    g.mirrors_global.store(true, Ordering::Relaxed);
    g.recompute_enabled();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enable_rules() {
        assert!(parse_trace_enable(None));
        assert!(parse_trace_enable(Some("1")));
        assert!(parse_trace_enable(Some("true")));
        assert!(!parse_trace_enable(Some("0")));
        assert!(!parse_trace_enable(Some("false")));
        assert!(!parse_trace_enable(Some("yes")));
        assert!(!parse_trace_enable(Some("")));
    }
}
