//! The exported C symbols of `include/strobe_metrics.h`, as a macro.
//!
//! Owns [`export_c_abi!`](crate::export_c_abi): expanded once in each
//! shared library that exports the C ABI (`libstrobe_metrics.so` from
//! `strobe-metrics-c`, and the preloaded `libstrobe_runtime.so`, so that a
//! tool loaded into a profiled program finds the API without linking the
//! library, and the runtime's region callbacks and the tool share one
//! registry). Each exported function forwards to the function of the same
//! name in [`crate::capi`]. Must never hold logic of its own, and never
//! export anything the header does not declare.

/// Defines the header's functions as `#[no_mangle]` exports forwarding to
/// [`crate::capi`]. Expand it once per shared library, at most once per
/// linked program.
#[macro_export]
macro_rules! export_c_abi {
    () => {
        /// The C ABI's exported functions (`include/strobe_metrics.h`).
        pub mod strobe_metrics_c_abi {
            use $crate::capi::{
                CallbackData, Context, Feature, Group, InfoCallback, InfoData, Intercepting,
                Properties, Status,
            };
            use ::std::ffi::{c_char, c_void};

            $crate::export_c_abi! { @fns
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
                fn strobe_metrics_iterate_info(
                    kind: u32,
                    callback: InfoCallback,
                    data: *mut c_void,
                ) -> Status;
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
                fn strobe_metrics_get_group(
                    context: *mut Context,
                    index: u32,
                    group: *mut Group,
                ) -> Status;
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
                fn strobe_metrics_set_intercepting(
                    callbacks: Intercepting,
                    data: *mut c_void,
                ) -> Status;
                /// `strobe_metrics_remove_intercepting`.
                fn strobe_metrics_remove_intercepting() -> Status;
                /// `strobe_metrics_intercepting_active` (internal: for the runtime).
                fn strobe_metrics_intercepting_active() -> u32;
                /// `strobe_metrics_intercept_region_begin` (internal: for the runtime).
                fn strobe_metrics_intercept_region_begin(data: *const CallbackData) -> Status;
                /// `strobe_metrics_intercept_region_end` (internal: for the runtime).
                fn strobe_metrics_intercept_region_end(data: *const CallbackData) -> Status;
            }
        }
    };
    (@fns $(
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
            unsafe { $crate::capi::$name($($arg),*) }
        }
    )*};
}
