/*
 * strobe_tool.h — the C ABI of strobe's buffered record service (strobe-buffer).
 *
 * A tool is a shared library named in STROBE_TOOL_LIB (several separated by
 * ':'). strobe dlopen()s it, checks `strobe_tool_api_version`, and calls
 * `strobe_tool_configure` with a versioned table of function pointers the
 * tool uses to create contexts, buffers, callback threads and services. The
 * tool needs no symbol from the host. At exit strobe flushes every buffer and
 * calls `strobe_tool_finalize` (optional), last loaded tool first.
 *
 * Minimal tool:
 *
 *   #include "strobe_tool.h"
 *   STROBE_TOOL_DEFINE_API_VERSION;
 *   int strobe_tool_configure(uint32_t v, const strobe_tool_api_t *api, void **data) {
 *       strobe_context_id_t ctx; strobe_buffer_id_t buf;
 *       api->create_context(&ctx);
 *       api->create_buffer(ctx, 65536, 60000, STROBE_BUFFER_POLICY_LOSSLESS, my_cb, NULL, &buf);
 *       api->configure_buffer_tracing_service(ctx, STROBE_KIND_REGION, NULL, 0, buf);
 *       return api->start_context(ctx);
 *   }
 *
 * Layouts are for 64-bit Linux; every record payload is 8-byte aligned.
 * Numeric values are stable. Minor versions only append to the table.
 */
#ifndef STROBE_TOOL_H
#define STROBE_TOOL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STROBE_TOOL_API_VERSION_MAJOR 1
#define STROBE_TOOL_API_VERSION_MINOR 0
#define STROBE_TOOL_API_VERSION \
    ((uint32_t)((STROBE_TOOL_API_VERSION_MAJOR << 16) | STROBE_TOOL_API_VERSION_MINOR))

/* Put this in exactly one source file of the tool. */
#define STROBE_TOOL_DEFINE_API_VERSION \
    __attribute__((visibility("default"))) const uint32_t strobe_tool_api_version = STROBE_TOOL_API_VERSION

/* ---- status codes ---------------------------------------------------- */
typedef int32_t strobe_status_t;
#define STROBE_STATUS_OK                         0
#define STROBE_STATUS_ERROR                      1
#define STROBE_STATUS_INVALID_ARGUMENT           2
#define STROBE_STATUS_NOT_FOUND                  3
#define STROBE_STATUS_CONTEXT_ACTIVE             4
#define STROBE_STATUS_SERVICE_ALREADY_CONFIGURED 5
#define STROBE_STATUS_LIMIT_REACHED              6
#define STROBE_STATUS_INCOMPATIBLE_VERSION       7
#define STROBE_STATUS_UNKNOWN_KIND               8
#define STROBE_STATUS_UNKNOWN_OPERATION          9
#define STROBE_STATUS_WOULD_DEADLOCK             10
#define STROBE_STATUS_RECORD_DROPPED             11

/* ---- handles (non-zero when valid) ------------------------------------ */
typedef struct { uint64_t handle; } strobe_context_id_t;
typedef struct { uint64_t handle; } strobe_buffer_id_t;
typedef struct { uint64_t handle; } strobe_callback_thread_t;

/* ---- categories, kinds, operations ------------------------------------ */
typedef enum {
    STROBE_CATEGORY_TRACING  = 1,
    STROBE_CATEGORY_SAMPLING = 2,
    STROBE_CATEGORY_COUNTERS = 3
} strobe_category_t;

typedef enum {
    STROBE_KIND_REGION       = 1, /* strobe_region_record_t */
    STROBE_KIND_SAMPLE       = 2, /* strobe_sample_record_t + frame_count uint64_t */
    STROBE_KIND_LIBRARY_CALL = 3, /* strobe_library_call_record_t */
    STROBE_KIND_MEMORY       = 4, /* strobe_memory_record_t */
    STROBE_KIND_COUNTER      = 5, /* strobe_counter_record_t */
    STROBE_KIND_MARKER       = 6, /* strobe_marker_record_t + text_len bytes */
    STROBE_KIND_XPTI         = 7, /* strobe_xpti_record_t */
    STROBE_KIND_LAST         = 8
} strobe_kind_t;
/* Operation values are indices into each kind's operation list; query
 * names with query_operation_name / iterate_operations. */

typedef enum {
    STROBE_BUFFER_POLICY_LOSSLESS = 1, /* full block swapped and delivered; producers wait (bounded) */
    STROBE_BUFFER_POLICY_DISCARD  = 2  /* records that do not fit are dropped, counted in drop_count */
} strobe_buffer_policy_t;

/* ---- records ----------------------------------------------------------- */
typedef struct {
    uint32_t    category;  /* strobe_category_t */
    uint32_t    kind;      /* strobe_kind_t */
    uint32_t    operation;
    uint32_t    size;      /* payload bytes */
    const void *payload;   /* valid only during the callback; 8-byte aligned */
} strobe_record_header_t;  /* 24 bytes */

typedef struct {
    uint64_t start_ns, end_ns; /* CLOCK_MONOTONIC */
    uint32_t tid, depth;
    uint64_t name_id, correlation_id;
} strobe_region_record_t; /* 40 bytes */

#define STROBE_MAX_SAMPLE_FRAMES 8000
typedef struct {
    uint64_t timestamp_ns;
    uint32_t tid, cpu;
    uint32_t frame_count;  /* uint64_t frames[frame_count] follow, innermost first */
    uint32_t flags;        /* bit 0 truncated, bit 1 unwinder stopped early */
    uint64_t cpu_time_ns;  /* the thread's CPU time when sampled (0 = unknown) */
    uint64_t peak_rss_kb;  /* the process's peak resident set size (0 = unknown) */
} strobe_sample_record_t; /* 40 bytes + frames */

typedef struct {
    uint64_t enter_ns, exit_ns, duration_ns;
    uint32_t tid, reserved;
    int64_t  return_value;
    uint64_t correlation_id;
} strobe_library_call_record_t; /* 48 bytes */

typedef struct {
    uint64_t timestamp_ns, address, size, old_address;
    uint32_t tid, reserved;
} strobe_memory_record_t; /* 40 bytes */

typedef struct {
    uint64_t timestamp_ns, counter_id;
    double   value;
    uint32_t tid;
    uint32_t value_type; /* 0 absolute, 1 accumulated, 2 relative */
} strobe_counter_record_t; /* 32 bytes */

#define STROBE_MAX_MARKER_TEXT 1024
typedef struct {
    uint64_t timestamp_ns, value, name_id;
    uint32_t tid;
    uint32_t text_len; /* text bytes follow (UTF-8, not NUL-terminated) */
} strobe_marker_record_t; /* 32 bytes + text */

typedef struct {
    uint64_t timestamp_ns, unique_id, parent_unique_id, instance, user_data;
    uint32_t tid;
    uint16_t trace_type;
    uint8_t  stream_id, reserved;
} strobe_xpti_record_t; /* 48 bytes */

typedef struct {
    uint64_t records_delivered, callbacks, records_dropped, records_too_large;
    uint64_t lossless_waits, lossless_wait_ns, lossless_wait_timeouts;
    uint64_t callback_failures, flushes;
} strobe_buffer_stats_t;

/* ---- callbacks --------------------------------------------------------- */
/* Buffered delivery, on the buffer's callback thread. Return 0; non-zero is
 * reported as a callback failure (counted, warned) and delivery goes on. */
typedef int (*strobe_buffer_callback_t)(strobe_context_id_t context,
                                        strobe_buffer_id_t buffer,
                                        const strobe_record_header_t *headers,
                                        size_t num_headers,
                                        void *callback_data,
                                        uint64_t drop_count);

typedef enum { STROBE_PHASE_ENTER = 1, STROBE_PHASE_EXIT = 2 } strobe_phase_t;

typedef union {
    uint64_t value;
    void    *ptr;
} strobe_user_data_t; /* zero at enter; what enter writes, exit reads */

typedef struct {
    uint64_t    context;
    uint64_t    correlation_id; /* same at enter and exit */
    uint32_t    kind, operation, phase, tid;
    const void *payload;
    uint64_t    payload_size;
} strobe_callback_record_t; /* 48 bytes */

/* Synchronous callback tracing, on the producing thread. */
typedef void (*strobe_callback_tracing_cb_t)(const strobe_callback_record_t *record,
                                             strobe_user_data_t *user_data,
                                             void *callback_data);

typedef int (*strobe_kind_iterate_cb_t)(uint32_t kind, void *data);                     /* non-zero stops */
typedef int (*strobe_operation_iterate_cb_t)(uint32_t kind, uint32_t op, void *data);   /* non-zero stops */

/* ---- the function table ------------------------------------------------ */
typedef struct strobe_tool_api_t {
    uint32_t size;    /* sizeof the host's table */
    uint32_t version; /* host's STROBE_TOOL_API_VERSION */
    strobe_status_t (*create_context)(strobe_context_id_t *out);
    strobe_status_t (*start_context)(strobe_context_id_t ctx);
    strobe_status_t (*stop_context)(strobe_context_id_t ctx);
    strobe_status_t (*context_is_active)(strobe_context_id_t ctx, int *active);
    strobe_status_t (*create_buffer)(strobe_context_id_t ctx, size_t size, size_t watermark,
                                     uint32_t policy, strobe_buffer_callback_t callback,
                                     void *callback_data, strobe_buffer_id_t *out);
    strobe_status_t (*flush_buffer)(strobe_buffer_id_t buffer); /* returns after the callback ran */
    strobe_status_t (*buffer_stats)(strobe_buffer_id_t buffer, strobe_buffer_stats_t *out);
    strobe_status_t (*create_callback_thread)(strobe_callback_thread_t *out);
    strobe_status_t (*assign_callback_thread)(strobe_buffer_id_t buffer, strobe_callback_thread_t thread);
    strobe_status_t (*configure_buffer_tracing_service)(strobe_context_id_t ctx, uint32_t kind,
                                                        const uint32_t *operations, size_t operations_count,
                                                        strobe_buffer_id_t buffer);
    strobe_status_t (*configure_callback_tracing_service)(strobe_context_id_t ctx, uint32_t kind,
                                                          const uint32_t *operations, size_t operations_count,
                                                          strobe_callback_tracing_cb_t callback,
                                                          void *callback_data);
    const char *(*query_kind_name)(uint32_t kind);
    const char *(*query_operation_name)(uint32_t kind, uint32_t operation);
    strobe_status_t (*iterate_kinds)(strobe_kind_iterate_cb_t cb, void *data);
    strobe_status_t (*iterate_operations)(uint32_t kind, strobe_operation_iterate_cb_t cb, void *data);
    const char *(*status_string)(strobe_status_t status);
    strobe_status_t (*emit)(uint32_t kind, uint32_t operation, const void *payload, size_t size);
} strobe_tool_api_t;

/* ---- what a tool exports ----------------------------------------------- */
/* Return 0 to stay loaded and be finalized; non-zero declines. */
typedef int (*strobe_tool_configure_fn_t)(uint32_t api_version, const strobe_tool_api_t *api, void **tool_data);
typedef void (*strobe_tool_finalize_fn_t)(void *tool_data);

int  strobe_tool_configure(uint32_t api_version, const strobe_tool_api_t *api, void **tool_data);
void strobe_tool_finalize(void *tool_data);

#ifdef __cplusplus
}
#endif
#endif /* STROBE_TOOL_H */
