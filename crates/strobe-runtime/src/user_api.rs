//! The user API's C ABI: the `strobe_runtime_api` table that
//! `include/strobe.h` and the `strobe-api` Rust crate look up once with
//! `dlsym`. Without the runtime the lookup fails and every call is a no-op.
//!
//! Owns the table and the entry points; each writes one event into the
//! calling thread's ring (no lock, no allocation once a name was seen on
//! the thread), catches panics and does nothing when the runtime is not
//! running.

use crate::counters::with_region_readings;
use crate::events::{emit, emit_now, name_id};
use crate::metrics_abi;
use crate::state::{current, Runtime};
use crate::thread_slot::slot_of_current_thread;
use std::ffi::{c_char, CStr};
use std::sync::atomic::Ordering;
use strobe_core::clock::now_ns;
use strobe_metrics::capi::region_kind;
use strobe_wire::causal::point_kind;
use strobe_wire::record::event;

/// Version of the table layout; grows only by appending entries.
pub const API_VERSION: u32 = 2;

/// The table (`strobe_api_t` in `include/strobe.h`).
#[repr(C)]
pub struct StrobeApi {
    /// Size of this struct in bytes.
    pub size: u32,
    /// [`API_VERSION`].
    pub version: u32,
    /// Opens a named region on the calling thread.
    pub push_region: extern "C" fn(*const c_char),
    /// Closes the calling thread's innermost region.
    pub pop_region: extern "C" fn(),
    /// Records an instant marker.
    pub mark: extern "C" fn(*const c_char),
    /// Names the calling thread (in the profile; the kernel keeps 15 bytes).
    pub set_thread_name: extern "C" fn(*const c_char),
    /// Pauses all collection.
    pub pause: extern "C" fn(),
    /// Resumes collection.
    pub resume: extern "C" fn(),
    /// Counts one visit of a throughput progress point (version 2).
    pub progress: extern "C" fn(*const c_char),
    /// A latency progress point's transaction begins (version 2).
    pub progress_begin: extern "C" fn(*const c_char),
    /// A latency progress point's transaction ends (version 2).
    pub progress_end: extern "C" fn(*const c_char),
}

/// The table the API looks up.
#[no_mangle]
#[used]
pub static strobe_runtime_api: StrobeApi = StrobeApi {
    size: std::mem::size_of::<StrobeApi>() as u32,
    version: API_VERSION,
    push_region,
    pop_region,
    mark,
    set_thread_name,
    pause,
    resume,
    progress,
    progress_begin,
    progress_end,
};

/// The runtime and the calling thread's slot, when regions are recorded.
#[inline]
fn recording() -> Option<(&'static Runtime, u32)> {
    let rt = current()?;
    if !rt.config.tracing || rt.paused.load(Ordering::Relaxed) {
        return None;
    }
    Some((rt, slot_of_current_thread(rt)?))
}

fn named(kind: u16, name: *const c_char) {
    if name.is_null() {
        return;
    }
    let _ = std::panic::catch_unwind(|| {
        if let Some((rt, slot)) = recording() {
            // SAFETY: the API takes NUL-terminated strings; null was refused.
            let id = unsafe { name_id(rt, slot, name) };
            emit_now(rt, slot, kind, id, &[]);
        }
    });
}

extern "C" fn push_region(name: *const c_char) {
    if name.is_null() {
        return;
    }
    let _ = std::panic::catch_unwind(|| {
        if let Some((rt, slot)) = recording() {
            // SAFETY: the API takes NUL-terminated strings; null was refused.
            let id = unsafe { name_id(rt, slot, name) };
            // The counters are read last, just before the region's code.
            with_region_readings(rt.counters.as_ref(), slot, |bytes| {
                emit_now(rt, slot, event::REGION_BEGIN, id, bytes)
            });
        }
        // A tool's group starts later still (see metrics_abi).
        // SAFETY: as above.
        metrics_abi::region_begin(region_kind::USER, || Some(unsafe { CStr::from_ptr(name) }));
    });
}

extern "C" fn pop_region() {
    let _ = std::panic::catch_unwind(|| {
        // A tool's group stops first, just after the region's code.
        metrics_abi::region_end(region_kind::USER);
        // Regions opened before a pause still end.
        let rt = current().filter(|rt| rt.config.tracing);
        if let Some((rt, slot)) = rt.and_then(|rt| Some((rt, slot_of_current_thread(rt)?))) {
            with_region_readings(rt.counters.as_ref(), slot, |bytes| {
                emit_now(rt, slot, event::REGION_END, 0, bytes)
            });
        }
    });
}

extern "C" fn mark(name: *const c_char) {
    named(event::MARK, name);
}

extern "C" fn set_thread_name(name: *const c_char) {
    if name.is_null() {
        return;
    }
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: NUL-terminated, non-null.
        let bytes = unsafe { std::ffi::CStr::from_ptr(name) }.to_bytes();
        // The kernel keeps at most 15 bytes (plus NUL).
        let mut short: Vec<u8> = bytes.iter().copied().take(15).collect();
        short.push(0);
        // SAFETY: naming the calling thread with a NUL-terminated string.
        unsafe { libc::pthread_setname_np(libc::pthread_self(), short.as_ptr() as *const c_char) };
        if let Some(rt) = current() {
            if let Some(slot) = slot_of_current_thread(rt) {
                emit(rt, slot, event::THREAD_NAME, 0, now_ns(), bytes);
            }
        }
    });
}

extern "C" fn pause() {
    let _ = std::panic::catch_unwind(|| {
        if let Some(rt) = current() {
            rt.paused.store(true, Ordering::Relaxed);
            if let Some(s) = &rt.sampler {
                s.pause();
            }
        }
    });
}

extern "C" fn resume() {
    let _ = std::panic::catch_unwind(|| {
        if let Some(rt) = current() {
            rt.paused.store(false, Ordering::Relaxed);
            if let Some(s) = &rt.sampler {
                s.resume();
            }
        }
    });
}

fn count_progress(name: *const c_char, kind: u32, end: bool) {
    if name.is_null() {
        return;
    }
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: the API takes NUL-terminated strings; null was refused.
        let name = unsafe { CStr::from_ptr(name) }.to_bytes();
        crate::causal::progress(name, kind, end);
    });
}

extern "C" fn progress(name: *const c_char) {
    count_progress(name, point_kind::THROUGHPUT, false);
}

extern "C" fn progress_begin(name: *const c_char) {
    count_progress(name, point_kind::LATENCY, false);
}

extern "C" fn progress_end(name: *const c_char) {
    count_progress(name, point_kind::LATENCY, true);
}
