//! The user API's C ABI: the `strobe_runtime_api` table that
//! `include/strobe.h` and the `strobe-api` Rust crate look up once with
//! `dlsym`. Without the runtime the lookup fails and every call is a no-op.
//!
//! Owns the table and the entry points; each catches panics and does nothing
//! when the runtime is not running.

use crate::state::current;
use std::ffi::{c_char, CStr};

/// Version of the table layout; grows only by appending entries.
pub const API_VERSION: u32 = 1;

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
};

fn bytes<'a>(name: *const c_char) -> Option<&'a [u8]> {
    // SAFETY: the API takes NUL-terminated strings; null is refused.
    (!name.is_null()).then(|| unsafe { CStr::from_ptr(name) }.to_bytes())
}

extern "C" fn push_region(name: *const c_char) {
    let _ = std::panic::catch_unwind(|| {
        if let (Some(rt), Some(name)) = (current(), bytes(name)) {
            if let Some(t) = &rt.tracing {
                t.push(name);
            }
        }
    });
}

extern "C" fn pop_region() {
    let _ = std::panic::catch_unwind(|| {
        if let Some(t) = current().and_then(|rt| rt.tracing.as_ref()) {
            t.pop();
        }
    });
}

extern "C" fn mark(name: *const c_char) {
    let _ = std::panic::catch_unwind(|| {
        if let (Some(rt), Some(name)) = (current(), bytes(name)) {
            if let Some(t) = &rt.tracing {
                t.mark(name);
            }
        }
    });
}

extern "C" fn set_thread_name(name: *const c_char) {
    let _ = std::panic::catch_unwind(|| {
        let (Some(rt), Some(name)) = (current(), bytes(name)) else {
            return;
        };
        let name = String::from_utf8_lossy(name).into_owned();
        // The kernel keeps at most 15 bytes (plus NUL).
        let mut short: Vec<u8> = name.as_bytes().iter().copied().take(15).collect();
        short.push(0);
        // SAFETY: naming the calling thread with a NUL-terminated string.
        unsafe { libc::pthread_setname_np(libc::pthread_self(), short.as_ptr() as *const c_char) };
        rt.recorder
            .thread_named(strobe_core::thread::gettid(), name);
    });
}

extern "C" fn pause() {
    let _ = std::panic::catch_unwind(|| {
        if let Some(rt) = current() {
            if let Some(s) = &rt.sampler {
                s.pause();
            }
            if let Some(t) = &rt.tracing {
                t.set_paused(true);
            }
        }
    });
}

extern "C" fn resume() {
    let _ = std::panic::catch_unwind(|| {
        if let Some(rt) = current() {
            if let Some(s) = &rt.sampler {
                s.resume();
            }
            if let Some(t) = &rt.tracing {
                t.set_paused(false);
            }
        }
    });
}
