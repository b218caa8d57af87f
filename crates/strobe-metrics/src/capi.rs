//! The C ABI of seed 003's profiler library for CPU counters
//! (`include/strobe_metrics.h`, exported by `libstrobe_metrics.so` from
//! the `strobe-metrics-c` crate).
//!
//! Owns the C boundary over [`crate::catalog`], [`crate::counting`] and
//! [`crate::defs`]: the `repr(C)` types of the header ([`types`]), status
//! codes and each thread's last error ([`status`]), the info API
//! ([`info`]), contexts, groups and start/stop/read ([`context`]), and the
//! intercepting API that gives tools per-region counts ([`intercept`]).
//! The functions here are `extern "C"` but not `#[no_mangle]`: only the
//! shared libraries that expand [`crate::export_c_abi!`] ([`exports`])
//! export them, so a Rust program that links this crate never exports a
//! second copy of the C symbols.
//!
//! Must never let a panic cross into C (every entry point runs its body in
//! [`status::guard`]), never trust a pointer it can check (contexts are
//! looked up in a registry of open ones), never print, and never keep a
//! reference into caller memory across a call to a caller's callback.

pub mod context;
pub mod exports;
pub mod info;
pub mod intercept;
pub mod status;
pub mod types;

pub use context::{
    strobe_metrics_close, strobe_metrics_get_data, strobe_metrics_get_group,
    strobe_metrics_get_metrics, strobe_metrics_group_count, strobe_metrics_group_get_data,
    strobe_metrics_group_read, strobe_metrics_group_start, strobe_metrics_group_stop,
    strobe_metrics_open, strobe_metrics_read, strobe_metrics_start, strobe_metrics_stop, Context,
    ContextCallback, Group, Properties,
};
pub use info::{strobe_metrics_get_info, strobe_metrics_iterate_info, strobe_metrics_query_info};
pub use intercept::{
    intercept_region_begin, intercept_region_end, intercepting_active,
    strobe_metrics_intercept_region_begin, strobe_metrics_intercept_region_end,
    strobe_metrics_intercepting_active, strobe_metrics_remove_intercepting,
    strobe_metrics_set_intercepting, Intercepting, RegionBeginCallback, RegionEndCallback,
    RegionEvent, DEPTH_FROM_STACK,
};
pub use status::{
    strobe_metrics_check_version, strobe_metrics_errno, strobe_metrics_error_string,
    strobe_metrics_version_major, strobe_metrics_version_minor, Status, VERSION_MAJOR,
    VERSION_MINOR,
};
pub use types::*;
