/* metrics_layout: prints the size of every struct of strobe_metrics.h and
 * the offset of every field, then the value of every constant, one
 * "name value" per line; crates/strobe-metrics-c/tests/c_abi.rs prints the
 * same list from the Rust types and compares. */
#include <stddef.h>
#include <stdio.h>

#include "strobe_metrics.h"

#define SIZE(t) printf("sizeof %s %zu\n", #t, sizeof(t))
#define OFF(t, f) printf("offsetof %s.%s %zu\n", #t, #f, offsetof(t, f))
#define VAL(c) printf("value %s %lld\n", #c, (long long)(c))

int main(void) {
    SIZE(strobe_metrics_status_t);
    SIZE(strobe_metrics_info_data_t);
    OFF(strobe_metrics_info_data_t, kind);
    OFF(strobe_metrics_info_data_t, metric.name);
    OFF(strobe_metrics_info_data_t, metric.description);
    OFF(strobe_metrics_info_data_t, metric.expr);
    OFF(strobe_metrics_info_data_t, metric.unit);
    OFF(strobe_metrics_info_data_t, metric.event);
    OFF(strobe_metrics_info_data_t, trace.name);
    OFF(strobe_metrics_info_data_t, trace.description);
    OFF(strobe_metrics_info_data_t, trace.parameter_count);
    OFF(strobe_metrics_info_data_t, counter.name);
    OFF(strobe_metrics_info_data_t, counter.description);
    OFF(strobe_metrics_info_data_t, counter.unit);
    OFF(strobe_metrics_info_data_t, counter.source);
    OFF(strobe_metrics_info_data_t, counter.unavailable_reason);
    OFF(strobe_metrics_info_data_t, counter.available);
    SIZE(strobe_metrics_feature_parameter_t);
    OFF(strobe_metrics_feature_parameter_t, parameter_name);
    OFF(strobe_metrics_feature_parameter_t, value);
    SIZE(strobe_metrics_data_t);
    OFF(strobe_metrics_data_t, kind);
    OFF(strobe_metrics_data_t, result_int32);
    OFF(strobe_metrics_data_t, result_int64);
    OFF(strobe_metrics_data_t, result_float);
    OFF(strobe_metrics_data_t, result_double);
    OFF(strobe_metrics_data_t, result_bytes.ptr);
    OFF(strobe_metrics_data_t, result_bytes.size);
    OFF(strobe_metrics_data_t, result_bytes.instances);
    SIZE(strobe_metrics_feature_t);
    OFF(strobe_metrics_feature_t, kind);
    OFF(strobe_metrics_feature_t, name);
    OFF(strobe_metrics_feature_t, parameters);
    OFF(strobe_metrics_feature_t, parameter_count);
    OFF(strobe_metrics_feature_t, data);
    SIZE(strobe_metrics_group_t);
    OFF(strobe_metrics_group_t, index);
    OFF(strobe_metrics_group_t, features);
    OFF(strobe_metrics_group_t, feature_count);
    OFF(strobe_metrics_group_t, context);
    SIZE(strobe_metrics_properties_t);
    OFF(strobe_metrics_properties_t, callback);
    OFF(strobe_metrics_properties_t, callback_arg);
    OFF(strobe_metrics_properties_t, queue);
    OFF(strobe_metrics_properties_t, queue_depth);
    OFF(strobe_metrics_properties_t, target);
    OFF(strobe_metrics_properties_t, pid);
    OFF(strobe_metrics_properties_t, flags);
    OFF(strobe_metrics_properties_t, max_slots);
    OFF(strobe_metrics_properties_t, reserved0);
    OFF(strobe_metrics_properties_t, reserved);
    SIZE(strobe_metrics_callback_data_t);
    OFF(strobe_metrics_callback_data_t, thread_id);
    OFF(strobe_metrics_callback_data_t, region_name);
    OFF(strobe_metrics_callback_data_t, region_kind);
    OFF(strobe_metrics_callback_data_t, depth);
    OFF(strobe_metrics_callback_data_t, begin_ns);
    OFF(strobe_metrics_callback_data_t, end_ns);
    SIZE(strobe_metrics_intercepting_t);
    OFF(strobe_metrics_intercepting_t, region_begin);
    OFF(strobe_metrics_intercepting_t, region_end);

    VAL(STROBE_METRICS_VERSION_MAJOR);
    VAL(STROBE_METRICS_VERSION_MINOR);
    VAL(STROBE_METRICS_STATUS_SUCCESS);
    VAL(STROBE_METRICS_STATUS_ERROR);
    VAL(STROBE_METRICS_STATUS_ERROR_INVALID_ARGUMENT);
    VAL(STROBE_METRICS_STATUS_ERROR_UNKNOWN_FEATURE);
    VAL(STROBE_METRICS_STATUS_ERROR_UNAVAILABLE);
    VAL(STROBE_METRICS_STATUS_ERROR_GROUPS);
    VAL(STROBE_METRICS_STATUS_ERROR_IO);
    VAL(STROBE_METRICS_STATUS_ERROR_DEFINITIONS);
    VAL(STROBE_METRICS_STATUS_ERROR_NOT_SUPPORTED);
    VAL(STROBE_METRICS_STATUS_ERROR_INCOMPATIBLE_VERSION);
    VAL(STROBE_METRICS_STATUS_ERROR_INTERNAL);
    VAL(STROBE_METRICS_INFO_KIND_METRIC);
    VAL(STROBE_METRICS_INFO_KIND_METRIC_COUNT);
    VAL(STROBE_METRICS_INFO_KIND_TRACE);
    VAL(STROBE_METRICS_INFO_KIND_TRACE_COUNT);
    VAL(STROBE_METRICS_INFO_KIND_COUNTER);
    VAL(STROBE_METRICS_INFO_KIND_COUNTER_COUNT);
    VAL(STROBE_METRICS_FEATURE_KIND_METRIC);
    VAL(STROBE_METRICS_FEATURE_KIND_TRACE);
    VAL(STROBE_METRICS_DATA_KIND_UNINIT);
    VAL(STROBE_METRICS_DATA_KIND_INT32);
    VAL(STROBE_METRICS_DATA_KIND_INT64);
    VAL(STROBE_METRICS_DATA_KIND_FLOAT);
    VAL(STROBE_METRICS_DATA_KIND_DOUBLE);
    VAL(STROBE_METRICS_DATA_KIND_BYTES);
    VAL(STROBE_METRICS_MODE_STANDALONE);
    VAL(STROBE_METRICS_MODE_CREATEQUEUE);
    VAL(STROBE_METRICS_MODE_SINGLEGROUP);
    VAL(STROBE_METRICS_TARGET_THREAD);
    VAL(STROBE_METRICS_TARGET_PROCESS);
    VAL(STROBE_METRICS_FLAG_INHERIT);
    VAL(STROBE_METRICS_ALL_GROUPS);
    VAL(STROBE_METRICS_REGION_KIND_USER);
    VAL(STROBE_METRICS_REGION_KIND_XPTI_TASK);
    return 0;
}
