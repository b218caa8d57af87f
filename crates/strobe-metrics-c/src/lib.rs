//! `libstrobe_metrics.so`: exports the C ABI of `include/strobe_metrics.h`,
//! implemented in [`strobe_metrics::capi`].
//!
//! Owns the exported symbols only: each function here forwards to the
//! function of the same name in `strobe_metrics::capi`, which checks its
//! arguments and catches panics. Must never hold state or logic of its
//! own (a second copy of the registries would split tools from the
//! runtime), and never export anything the header does not declare.

use std::ffi::{c_char, c_void};

use strobe_metrics::capi::{
    self, CallbackData, Context, Feature, Group, InfoCallback, InfoData, Intercepting, Properties,
    Status,
};

/// Declares exported wrappers: `fn name(args) -> ret;` forwards to
/// `capi::name(args)`.
macro_rules! export {
    ($(
        $(#[$doc:meta])*
        fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty;
    )*) => {$(
        $(#[$doc])*
        ///
        /// # Safety
        /// As the header documents for this function (pointers null or
        /// valid as described there).
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            // SAFETY: the caller's contract is the one of the forwarded
            // function, which documents the same requirements.
            #[allow(unused_unsafe)]
            unsafe { capi::$name($($arg),*) }
        }
    )*};
}

export! {
    /// `strobe_metrics_errno`.
    fn strobe_metrics_errno() -> Status;
    /// `strobe_metrics_error_string`.
    fn strobe_metrics_error_string() -> *const c_char;
    /// `strobe_metrics_version_major`.
    fn strobe_metrics_version_major() -> u32;
    /// `strobe_metrics_version_minor`.
    fn strobe_metrics_version_minor() -> u32;
    /// `strobe_metrics_check_version`.
    fn strobe_metrics_check_version(header_major: u32, header_minor: u32) -> Status;

    /// `strobe_metrics_get_info`.
    fn strobe_metrics_get_info(kind: u32, data: *mut c_void) -> Status;
    /// `strobe_metrics_iterate_info`.
    fn strobe_metrics_iterate_info(kind: u32, callback: InfoCallback, data: *mut c_void) -> Status;
    /// `strobe_metrics_query_info`.
    fn strobe_metrics_query_info(
        kind: u32,
        query: InfoData,
        callback: InfoCallback,
        data: *mut c_void,
    ) -> Status;

    /// `strobe_metrics_open`.
    fn strobe_metrics_open(
        features: *mut Feature,
        feature_count: u32,
        context: *mut *mut Context,
        mode: u32,
        properties: *const Properties,
    ) -> Status;
    /// `strobe_metrics_close`.
    fn strobe_metrics_close(context: *mut Context) -> Status;
    /// `strobe_metrics_group_count`.
    fn strobe_metrics_group_count(context: *mut Context, count: *mut u32) -> Status;
    /// `strobe_metrics_get_group`.
    fn strobe_metrics_get_group(context: *mut Context, index: u32, group: *mut Group) -> Status;
    /// `strobe_metrics_get_metrics`.
    fn strobe_metrics_get_metrics(context: *mut Context) -> Status;

    /// `strobe_metrics_start`.
    fn strobe_metrics_start(context: *mut Context, group_index: u32) -> Status;
    /// `strobe_metrics_stop`.
    fn strobe_metrics_stop(context: *mut Context, group_index: u32) -> Status;
    /// `strobe_metrics_read`.
    fn strobe_metrics_read(context: *mut Context, group_index: u32) -> Status;
    /// `strobe_metrics_get_data`.
    fn strobe_metrics_get_data(context: *mut Context, group_index: u32) -> Status;
    /// `strobe_metrics_group_start`.
    fn strobe_metrics_group_start(group: *mut Group) -> Status;
    /// `strobe_metrics_group_stop`.
    fn strobe_metrics_group_stop(group: *mut Group) -> Status;
    /// `strobe_metrics_group_read`.
    fn strobe_metrics_group_read(group: *mut Group) -> Status;
    /// `strobe_metrics_group_get_data`.
    fn strobe_metrics_group_get_data(group: *mut Group) -> Status;

    /// `strobe_metrics_set_intercepting`.
    fn strobe_metrics_set_intercepting(callbacks: Intercepting, data: *mut c_void) -> Status;
    /// `strobe_metrics_remove_intercepting`.
    fn strobe_metrics_remove_intercepting() -> Status;
    /// `strobe_metrics_intercepting_active` (internal: for the runtime).
    fn strobe_metrics_intercepting_active() -> u32;
    /// `strobe_metrics_intercept_region_begin` (internal: for the runtime).
    fn strobe_metrics_intercept_region_begin(data: *const CallbackData) -> Status;
    /// `strobe_metrics_intercept_region_end` (internal: for the runtime).
    fn strobe_metrics_intercept_region_end(data: *const CallbackData) -> Status;
}
