//! The counter C API (`include/strobe_metrics.h`) exported by the runtime
//! itself, and the runtime's regions handed to its intercepting callbacks.
//!
//! Owns two things: the exported symbols (so that a tool loaded into the
//! profiled program, by `STROBE_TOOL_LIB` or by the program, resolves
//! `strobe_metrics_*` here, without linking `libstrobe_metrics.so`, and
//! shares one registry with the region callbacks below), and the calls to
//! `strobe_metrics::capi::intercept_region_begin/end` around user-API
//! regions and XPTI task begin/end pairs (the library counts their nesting).
//! Never runs in a signal handler; when no tool registered callbacks a
//! region costs two relaxed loads at each end.

use std::ffi::CStr;
#[cfg(doc)]
use strobe_metrics::capi::region_kind;
use strobe_metrics::capi::{self, RegionEvent, DEPTH_FROM_STACK};

strobe_metrics::export_c_abi!();

/// A region of `kind` (a [`region_kind`] value) begins on the calling
/// thread: a registered tool is asked for a group to count it. `name` is
/// called only when a tool is registered.
pub fn region_begin<'a>(kind: u32, name: impl FnOnce() -> Option<&'a CStr>) {
    let _ = capi::intercept_region_begin(&RegionEvent {
        name: if capi::intercepting_active() {
            name()
        } else {
            None
        },
        kind,
        depth: DEPTH_FROM_STACK,
        ..RegionEvent::default()
    });
}

/// The calling thread's innermost region of `kind` ends.
pub fn region_end(kind: u32) {
    let _ = capi::intercept_region_end(&RegionEvent {
        kind,
        depth: DEPTH_FROM_STACK,
        ..RegionEvent::default()
    });
}
