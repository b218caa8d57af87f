//! The `repr(C)` types and constants of `include/strobe_metrics.h`, but
//! for those that name a context (the group, the completion callback, the
//! open properties: in [`super::context`]) and the intercepting API's
//! callbacks (in [`super::intercept`]).
//!
//! Owns layouts only: every struct here mirrors the header field for
//! field, and the assertions at the bottom pin the 64-bit Linux layout the
//! header documents (the C tests print the same numbers from C). Must
//! never change a field's order, type or size, and never use a Rust enum
//! for a value C writes (any integer may arrive): kinds are `u32`
//! constants and statuses [`Status`] over `i32`.

use std::ffi::{c_char, c_void};

use super::status::Status;

/// `strobe_metrics_info_kind_t`.
pub mod info_kind {
    /// `STROBE_METRICS_INFO_KIND_METRIC`: metric definitions.
    pub const METRIC: u32 = 0;
    /// `STROBE_METRICS_INFO_KIND_METRIC_COUNT`.
    pub const METRIC_COUNT: u32 = 1;
    /// `STROBE_METRICS_INFO_KIND_TRACE`: none on CPUs.
    pub const TRACE: u32 = 2;
    /// `STROBE_METRICS_INFO_KIND_TRACE_COUNT`.
    pub const TRACE_COUNT: u32 = 3;
    /// `STROBE_METRICS_INFO_KIND_COUNTER`: the counter catalog.
    pub const COUNTER: u32 = 4;
    /// `STROBE_METRICS_INFO_KIND_COUNTER_COUNT`.
    pub const COUNTER_COUNT: u32 = 5;
}

/// `strobe_metrics_feature_kind_t`.
pub mod feature_kind {
    /// `STROBE_METRICS_FEATURE_KIND_METRIC`.
    pub const METRIC: u32 = 0;
    /// `STROBE_METRICS_FEATURE_KIND_TRACE` (not supported).
    pub const TRACE: u32 = 1;
}

/// `strobe_metrics_data_kind_t`.
pub mod data_kind {
    /// `STROBE_METRICS_DATA_KIND_UNINIT`: no value.
    pub const UNINIT: u32 = 0;
    /// `STROBE_METRICS_DATA_KIND_INT32`.
    pub const INT32: u32 = 1;
    /// `STROBE_METRICS_DATA_KIND_INT64`: counters.
    pub const INT64: u32 = 2;
    /// `STROBE_METRICS_DATA_KIND_FLOAT`.
    pub const FLOAT: u32 = 3;
    /// `STROBE_METRICS_DATA_KIND_DOUBLE`: derived metrics, scaled counters.
    pub const DOUBLE: u32 = 4;
    /// `STROBE_METRICS_DATA_KIND_BYTES`: traces (never on CPUs).
    pub const BYTES: u32 = 5;
}

/// `strobe_metrics_mode_t` (a mask).
pub mod mode {
    /// `STROBE_METRICS_MODE_STANDALONE`: accepted; every CPU context is.
    pub const STANDALONE: u32 = 1;
    /// `STROBE_METRICS_MODE_CREATEQUEUE`: accepted, meaningless on CPUs.
    pub const CREATEQUEUE: u32 = 2;
    /// `STROBE_METRICS_MODE_SINGLEGROUP`: one group or an error.
    pub const SINGLEGROUP: u32 = 4;
    /// Every mode bit.
    pub const ALL: u32 = STANDALONE | CREATEQUEUE | SINGLEGROUP;
}

/// `strobe_metrics_target_t`.
pub mod target {
    /// `STROBE_METRICS_TARGET_THREAD`: one thread (0 = the caller).
    pub const THREAD: u32 = 0;
    /// `STROBE_METRICS_TARGET_PROCESS`: a process (0 = the caller).
    pub const PROCESS: u32 = 1;
}

/// `properties.flags`.
pub mod flags {
    /// `STROBE_METRICS_FLAG_INHERIT`: count threads and children created
    /// after the open (process target only).
    pub const INHERIT: u32 = 1;
}

/// `strobe_metrics_region_kind_t`.
pub mod region_kind {
    /// `STROBE_METRICS_REGION_KIND_USER`: a user API region.
    pub const USER: u32 = 0;
    /// `STROBE_METRICS_REGION_KIND_XPTI_TASK`: an XPTI task.
    pub const XPTI_TASK: u32 = 1;
}

/// `STROBE_METRICS_ALL_GROUPS`: every group of a context at once.
pub const ALL_GROUPS: u32 = u32::MAX;

/// `info.metric`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MetricInfo {
    /// Metric name.
    pub name: *const c_char,
    /// What it measures, or null.
    pub description: *const c_char,
    /// Expression of a derived metric; null for a basic metric.
    pub expr: *const c_char,
    /// Unit, or null.
    pub unit: *const c_char,
    /// The catalog event of a basic metric; null for a derived metric.
    pub event: *const c_char,
}

/// `info.trace`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TraceInfo {
    /// Trace name.
    pub name: *const c_char,
    /// Description.
    pub description: *const c_char,
    /// Number of parameters.
    pub parameter_count: u32,
}

/// `info.counter`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CounterInfo {
    /// Catalog name.
    pub name: *const c_char,
    /// What it counts.
    pub description: *const c_char,
    /// Unit, or "".
    pub unit: *const c_char,
    /// `hardware`, `software`, `rusage`, ... ([`crate::catalog::CounterKind::as_str`]).
    pub source: *const c_char,
    /// Why it cannot be counted here; null when available.
    pub unavailable_reason: *const c_char,
    /// 1 when it can be counted.
    pub available: u32,
}

/// The anonymous union of `strobe_metrics_info_data_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union InfoUnion {
    /// For `INFO_KIND_METRIC`.
    pub metric: MetricInfo,
    /// For `INFO_KIND_TRACE`.
    pub trace: TraceInfo,
    /// For `INFO_KIND_COUNTER`.
    pub counter: CounterInfo,
}

/// `strobe_metrics_info_data_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct InfoData {
    /// An [`info_kind`] value.
    pub kind: u32,
    /// The entry.
    pub u: InfoUnion,
}

/// `strobe_metrics_info_callback_t`.
pub type InfoCallback = Option<unsafe extern "C" fn(info: InfoData, data: *mut c_void) -> Status>;

/// `strobe_metrics_feature_parameter_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct FeatureParameter {
    /// Parameter code.
    pub parameter_name: u32,
    /// Its value.
    pub value: u32,
}

/// `result_bytes` of `strobe_metrics_data_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Bytes {
    /// Pointer.
    pub ptr: *mut c_void,
    /// Byte size.
    pub size: u32,
    /// Number of trace instances.
    pub instances: u32,
}

/// The anonymous union of `strobe_metrics_data_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union DataValue {
    /// `INT32`.
    pub result_int32: u32,
    /// `INT64`.
    pub result_int64: u64,
    /// `FLOAT`.
    pub result_float: f32,
    /// `DOUBLE`.
    pub result_double: f64,
    /// `BYTES`.
    pub result_bytes: Bytes,
}

/// `strobe_metrics_data_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Data {
    /// A [`data_kind`] value.
    pub kind: u32,
    /// The value.
    pub value: DataValue,
}

impl Data {
    /// No value (`UNINIT`, all bits zero).
    pub const UNINIT: Data = Data {
        kind: data_kind::UNINIT,
        value: DataValue {
            result_bytes: Bytes {
                ptr: std::ptr::null_mut(),
                size: 0,
                instances: 0,
            },
        },
    };

    /// An `INT64` value.
    pub fn int64(v: u64) -> Data {
        let mut d = Data::UNINIT;
        d.kind = data_kind::INT64;
        d.value.result_int64 = v;
        d
    }

    /// A `DOUBLE` value.
    pub fn double(v: f64) -> Data {
        let mut d = Data::UNINIT;
        d.kind = data_kind::DOUBLE;
        d.value.result_double = v;
        d
    }

    /// The value as a number, `None` for `UNINIT` and `BYTES`.
    pub fn as_f64(&self) -> Option<f64> {
        // SAFETY: each arm reads the union member `kind` says was written;
        // every bit pattern is a valid integer or float.
        unsafe {
            match self.kind {
                data_kind::INT32 => Some(f64::from(self.value.result_int32)),
                data_kind::INT64 => Some(self.value.result_int64 as f64),
                data_kind::FLOAT => Some(f64::from(self.value.result_float)),
                data_kind::DOUBLE => Some(self.value.result_double),
                _ => None,
            }
        }
    }
}

impl std::fmt::Debug for Data {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Data")
            .field("kind", &self.kind)
            .field("value", &self.as_f64())
            .finish()
    }
}

/// `strobe_metrics_feature_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Feature {
    /// A [`feature_kind`] value.
    pub kind: u32,
    /// Feature name.
    pub name: *const c_char,
    /// Parameters (none for CPU metrics).
    pub parameters: *const FeatureParameter,
    /// Number of parameters; must be 0.
    pub parameter_count: u32,
    /// The value the library writes.
    pub data: Data,
}

/// `strobe_metrics_callback_data_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CallbackData {
    /// Kernel thread id of the region.
    pub thread_id: u64,
    /// Region name (valid during the call).
    pub region_name: *const c_char,
    /// A [`region_kind`] value.
    pub region_kind: u32,
    /// Nesting depth on the thread, 0 = outermost.
    pub depth: u32,
    /// `CLOCK_MONOTONIC` ns at the begin.
    pub begin_ns: u64,
    /// At the end; 0 in `region_begin`.
    pub end_ns: u64,
}

// The layouts the header documents (64-bit Linux).
#[cfg(target_pointer_width = "64")]
mod layout {
    use super::*;
    use std::mem::{offset_of, size_of};

    const _: () = assert!(size_of::<Status>() == 4);
    const _: () = assert!(size_of::<MetricInfo>() == 40);
    const _: () = assert!(size_of::<TraceInfo>() == 24);
    const _: () = assert!(size_of::<CounterInfo>() == 48);
    const _: () = assert!(size_of::<InfoData>() == 56);
    const _: () = assert!(offset_of!(InfoData, u) == 8);
    const _: () = assert!(offset_of!(CounterInfo, available) == 40);
    const _: () = assert!(size_of::<FeatureParameter>() == 8);
    const _: () = assert!(size_of::<Data>() == 24);
    const _: () = assert!(offset_of!(Data, value) == 8);
    const _: () = assert!(size_of::<Feature>() == 56);
    const _: () = assert!(offset_of!(Feature, name) == 8);
    const _: () = assert!(offset_of!(Feature, parameters) == 16);
    const _: () = assert!(offset_of!(Feature, parameter_count) == 24);
    const _: () = assert!(offset_of!(Feature, data) == 32);
    const _: () = assert!(size_of::<CallbackData>() == 40);
    const _: () = assert!(offset_of!(CallbackData, region_kind) == 16);
    const _: () = assert!(offset_of!(CallbackData, depth) == 20);
    const _: () = assert!(offset_of!(CallbackData, begin_ns) == 24);
    const _: () = assert!(offset_of!(CallbackData, end_ns) == 32);
}
