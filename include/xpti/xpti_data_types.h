/*
 * xpti_data_types.h — data types of the XPTI tracing API, as implemented by
 * strobe (libstrobe_xpti.so). Layouts match upstream XPTI with 64-bit unique
 * ids on x86-64 (payload_t 80 bytes, trace_event_data_t 128 bytes).
 *
 * C code uses the xpti_* typedefs and constants; C++ code additionally gets
 * namespace xpti (payload_t with constructors, enum classes, scoped_notify in
 * xpti_trace_framework.h), as in upstream.
 */
#ifndef XPTI_DATA_TYPES_H
#define XPTI_DATA_TYPES_H

#include <stddef.h>
#include <stdint.h>
#ifndef __cplusplus
#include <stdbool.h>
#endif

#ifdef __cplusplus
#define XPTI_EXTERN_C extern "C"
#else
#define XPTI_EXTERN_C
#endif
/* Marks a subscriber entry point or callback (xptiTraceInit, ...). */
#define XPTI_CALLBACK_API XPTI_EXTERN_C __attribute__((visibility("default")))
/* Marks a framework export. */
#define XPTI_EXPORT_API XPTI_EXTERN_C __attribute__((visibility("default")))

/* Trace-point type encoding: bit 0 = begin/end, bit 7 = user defined,
 * bits 8..15 = vendor (tool) id. */
#define XPTI_TRACE_POINT_BEGIN(val) ((uint16_t)((val) << 1))
#define XPTI_TRACE_POINT_END(val) ((uint16_t)(((val) << 1) | 1))
#define XPTI_EVENT(val) ((uint16_t)(val))
#define XPTI_TOOL_ID(val) ((uint8_t)(((val) >> 8) & 0x00ff))
#define XPTI_EXTRACT_USER_DEFINED_ID(val) ((uint8_t)((val) & 0x007f))

typedef uint32_t xpti_string_id_t;
typedef int32_t xpti_object_id_t;
typedef uint8_t xpti_stream_id_t;
typedef int32_t xpti_result_t;

#define XPTI_INVALID_STRING_ID ((xpti_string_id_t)UINT32_MAX)
#define XPTI_INVALID_OBJECT_ID ((xpti_object_id_t)-1)
#define XPTI_INVALID_UID ((uint64_t)0)
#define XPTI_INVALID_STREAM_ID ((xpti_stream_id_t)255)
#define XPTI_INVALID_LINE ((uint32_t)UINT32_MAX)

/* Payload availability flags (payload_t::flags). */
#define XPTI_PAYLOAD_NAME_AVAILABLE ((uint64_t)1)
#define XPTI_PAYLOAD_SOURCE_FILE_AVAILABLE ((uint64_t)2)
#define XPTI_PAYLOAD_CODE_POINTER_AVAILABLE ((uint64_t)4)
#define XPTI_PAYLOAD_LINE_INFO_AVAILABLE ((uint64_t)8)
#define XPTI_PAYLOAD_COLUMN_INFO_AVAILABLE ((uint64_t)16)
#define XPTI_PAYLOAD_STACK_TRACE_AVAILABLE ((uint64_t)32)
#define XPTI_PAYLOAD_REGISTERED ((uint64_t)1 << 15)
#define XPTI_PAYLOAD_HASH_AVAILABLE ((uint64_t)1 << 17)

/* Event availability flags (trace_event_data_t::flags). */
#define XPTI_EVENT_UID_AVAILABLE ((uint64_t)1)
#define XPTI_EVENT_SOURCE_AVAILABLE ((uint64_t)2)
#define XPTI_EVENT_TARGET_AVAILABLE ((uint64_t)4)
#define XPTI_EVENT_TYPE_AVAILABLE ((uint64_t)8)
#define XPTI_EVENT_ACTIVITY_TYPE_AVAILABLE ((uint64_t)16)
#define XPTI_EVENT_PAYLOAD_AVAILABLE ((uint64_t)32)

/* Result codes (plain constants in C; xpti::result_t in C++). */
#define XPTI_RC_SUCCESS ((xpti_result_t)0)
#define XPTI_RC_FALSE ((xpti_result_t)1)
#define XPTI_RC_FAIL ((xpti_result_t)0x80004001)
#define XPTI_RC_NOTIMPL ((xpti_result_t)0x80004002)
#define XPTI_RC_DUPLICATE ((xpti_result_t)0x80004003)
#define XPTI_RC_NOTFOUND ((xpti_result_t)0x80004004)
#define XPTI_RC_UNDELETE ((xpti_result_t)0x80004005)
#define XPTI_RC_INVALIDARG ((xpti_result_t)0x80004006)

/* Trace-point types (uint16). */
enum {
  xpti_tp_graph_create = 2,
  xpti_tp_node_create = 4,
  xpti_tp_edge_create = 6,
  xpti_tp_region_begin = 8,
  xpti_tp_region_end = 9,
  xpti_tp_task_begin = 10,
  xpti_tp_task_end = 11,
  xpti_tp_barrier_begin = 12,
  xpti_tp_barrier_end = 13,
  xpti_tp_lock_begin = 14,
  xpti_tp_lock_end = 15,
  xpti_tp_signal = 16,
  xpti_tp_transfer_begin = 18,
  xpti_tp_transfer_end = 19,
  xpti_tp_thread_begin = 20,
  xpti_tp_thread_end = 21,
  xpti_tp_wait_begin = 22,
  xpti_tp_wait_end = 23,
  xpti_tp_function_begin = 24,
  xpti_tp_function_end = 25,
  xpti_tp_metadata = 26,
  xpti_tp_function_with_args_begin = 28,
  xpti_tp_function_with_args_end = 29,
  xpti_tp_mem_alloc_begin = 32,
  xpti_tp_mem_alloc_end = 33,
  xpti_tp_mem_release_begin = 34,
  xpti_tp_mem_release_end = 35,
  xpti_tp_offload_alloc_memory_object_construct = 36,
  xpti_tp_offload_alloc_memory_object_destruct = 37,
  xpti_tp_offload_alloc_memory_object_associate = 38,
  xpti_tp_offload_alloc_memory_object_release = 39,
  xpti_tp_offload_alloc_accessor = 40,
  xpti_tp_queue_create = 42,
  xpti_tp_queue_destroy = 43,
  xpti_tp_diagnostics = 126,
  xpti_tp_user_defined = 128
};

/* Event types (uint16). */
enum {
  xpti_event_unknown = 0,
  xpti_event_graph = 1,
  xpti_event_algorithm = 2,
  xpti_event_barrier = 3,
  xpti_event_scheduler = 4,
  xpti_event_async = 5,
  xpti_event_lock = 6,
  xpti_event_offload_read = 7,
  xpti_event_offload_write = 8,
  xpti_event_offload_memory_object = 9,
  xpti_event_offload_accessor = 10,
  xpti_event_user_defined = 128
};

/* Activity types (uint16). */
enum {
  xpti_activity_unknown = 0,
  xpti_activity_active = 1,
  xpti_activity_overhead = 2,
  xpti_activity_background = 4,
  xpti_activity_sleep = 8
};

/* Metadata object types (object_data_t::type). */
enum {
  xpti_metadata_unknown = 0,
  xpti_metadata_boolean = 1,
  xpti_metadata_signed_integer = 2,
  xpti_metadata_unsigned_integer = 3,
  xpti_metadata_floating = 4,
  xpti_metadata_string = 5
};

#ifdef __cplusplus
namespace xpti {
using string_id_t = xpti_string_id_t;
using object_id_t = xpti_object_id_t;
using stream_id_t = xpti_stream_id_t;

enum class result_t : int32_t {
  XPTI_RESULT_SUCCESS = 0,
  XPTI_RESULT_FALSE = 1,
  XPTI_RESULT_FAIL = (int32_t)0x80004001,
  XPTI_RESULT_NOTIMPL = (int32_t)0x80004002,
  XPTI_RESULT_DUPLICATE = (int32_t)0x80004003,
  XPTI_RESULT_NOTFOUND = (int32_t)0x80004004,
  XPTI_RESULT_UNDELETE = (int32_t)0x80004005,
  XPTI_RESULT_INVALIDARG = (int32_t)0x80004006
};

enum class trace_point_type_t : uint16_t {
  unknown_type = 0,
  graph_create = 2, node_create = 4, edge_create = 6,
  region_begin = 8, region_end = 9, task_begin = 10, task_end = 11,
  barrier_begin = 12, barrier_end = 13, lock_begin = 14, lock_end = 15,
  signal = 16, transfer_begin = 18, transfer_end = 19,
  thread_begin = 20, thread_end = 21, wait_begin = 22, wait_end = 23,
  function_begin = 24, function_end = 25, metadata = 26,
  function_with_args_begin = 28, function_with_args_end = 29,
  mem_alloc_begin = 32, mem_alloc_end = 33,
  mem_release_begin = 34, mem_release_end = 35,
  offload_alloc_memory_object_construct = 36,
  offload_alloc_memory_object_destruct = 37,
  offload_alloc_memory_object_associate = 38,
  offload_alloc_memory_object_release = 39,
  offload_alloc_accessor = 40,
  queue_create = 42, queue_destroy = 43,
  diagnostics = 126, user_defined = 128
};

enum class trace_event_type_t : uint16_t {
  unknown_event = 0, graph = 1, algorithm = 2, barrier = 3, scheduler = 4,
  async = 5, lock = 6, offload_read = 7, offload_write = 8,
  offload_memory_object = 9, offload_accessor = 10, user_defined = 128
};

enum class trace_activity_type_t : uint16_t {
  unknown_activity = 0, active = 1, overhead = 2, background = 4, sleep = 8
};

enum class metadata_type_t : uint8_t {
  unknown = 0, boolean = 1, signed_integer = 2, unsigned_integer = 3,
  floating = 4, string = 5
};

struct uid_t {
  uint64_t p1 = 0, p2 = 0, p3 = 0;
};

/* A trace point's description. The constructors set the availability flags. */
struct payload_t {
  const char *name = nullptr;
  const char *stack_trace = nullptr;
  const char *source_file = nullptr;
  uint32_t line_no = XPTI_INVALID_LINE;
  uint32_t column_no = XPTI_INVALID_LINE;
  const void *code_ptr_va = nullptr;
  uint64_t internal = 0;
  uint64_t flags = 0;
  uid_t uid;

  payload_t() = default;
  explicit payload_t(const char *func_name) : name(func_name) {
    if (name) flags |= XPTI_PAYLOAD_NAME_AVAILABLE;
  }
  explicit payload_t(const void *codeptr) : code_ptr_va(codeptr) {
    if (codeptr) flags |= XPTI_PAYLOAD_CODE_POINTER_AVAILABLE;
  }
  payload_t(const char *func_name, const void *codeptr)
      : name(func_name), code_ptr_va(codeptr) {
    if (name) flags |= XPTI_PAYLOAD_NAME_AVAILABLE;
    if (codeptr) flags |= XPTI_PAYLOAD_CODE_POINTER_AVAILABLE;
  }
  payload_t(const char *func_name, const char *source, int line, int col,
            const void *codeptr = nullptr)
      : name(func_name), source_file(source), line_no((uint32_t)line),
        column_no((uint32_t)col), code_ptr_va(codeptr) {
    if (name) flags |= XPTI_PAYLOAD_NAME_AVAILABLE;
    if (source) flags |= XPTI_PAYLOAD_SOURCE_FILE_AVAILABLE |
                         XPTI_PAYLOAD_LINE_INFO_AVAILABLE |
                         XPTI_PAYLOAD_COLUMN_INFO_AVAILABLE;
    if (codeptr) flags |= XPTI_PAYLOAD_CODE_POINTER_AVAILABLE;
  }
  /* Accepts a function directly as the code address, as the seed's
   * examples do: payload_t p("function1", "main.cpp", 104, 2, function1). */
  template <typename R, typename... A>
  payload_t(const char *func_name, const char *source, int line, int col,
            R (*fn)(A...))
      : payload_t(func_name, source, line, col,
                  reinterpret_cast<const void *>(fn)) {}
  template <typename R, typename... A>
  payload_t(const char *func_name, R (*fn)(A...))
      : payload_t(func_name, reinterpret_cast<const void *>(fn)) {}
};

/* A trace-point event. Metadata is not stored here: use xptiAddMetadata and
 * xptiStrobeMetadataCount / xptiStrobeMetadataAt. */
struct trace_event_data_t {
  uint64_t unique_id = 0;
  uint64_t data_id = 0;
  uint64_t instance_id = 0;
  uint16_t event_type = 0;
  uint16_t activity_type = 0;
  uint32_t unused = 0;
  uint64_t source_id = 0;
  uint64_t target_id = 0;
  struct {
    payload_t *payload = nullptr;
    unsigned char opaque[56] = {};
  } reserved;
  void *global_user_data = nullptr;
  uint64_t flags = 0;
};

struct object_data_t {
  size_t size;
  const char *data;
  uint8_t type;
};

using tracepoint_callback_api_t = void (*)(uint16_t, trace_event_data_t *,
                                           trace_event_data_t *, uint64_t,
                                           const void *);
} // namespace xpti

typedef xpti::uid_t xpti_uid_t;
typedef xpti::payload_t xpti_payload_t;
typedef xpti::trace_event_data_t xpti_trace_event_data_t;
typedef xpti::object_data_t xpti_object_data_t;
typedef xpti::tracepoint_callback_api_t xpti_tracepoint_callback_api_t;

#else /* C */

typedef struct xpti_uid {
  uint64_t p1, p2, p3;
} xpti_uid_t;

/* A trace point's description. Set the availability flags for the fields
 * you fill, or use xpti_payload_init(). */
typedef struct xpti_payload {
  const char *name;
  const char *stack_trace;
  const char *source_file;
  uint32_t line_no;   /* XPTI_INVALID_LINE when unknown */
  uint32_t column_no; /* XPTI_INVALID_LINE when unknown */
  const void *code_ptr_va;
  uint64_t internal; /* the 64-bit unique id, once registered */
  uint64_t flags;
  xpti_uid_t uid;
} xpti_payload_t;

/* A trace-point event. `reserved.opaque` belongs to the dispatcher;
 * metadata is reached through functions (xptiStrobeMetadataCount/At). */
typedef struct xpti_trace_event_data {
  uint64_t unique_id;
  uint64_t data_id;
  uint64_t instance_id;
  uint16_t event_type;
  uint16_t activity_type;
  uint32_t unused;
  uint64_t source_id;
  uint64_t target_id;
  struct {
    xpti_payload_t *payload;
    unsigned char opaque[56];
  } reserved;
  void *global_user_data;
  uint64_t flags;
} xpti_trace_event_data_t;

typedef struct xpti_object_data {
  size_t size;
  const char *data;
  uint8_t type;
} xpti_object_data_t;

typedef void (*xpti_tracepoint_callback_api_t)(uint16_t trace_type,
                                               xpti_trace_event_data_t *parent,
                                               xpti_trace_event_data_t *event,
                                               uint64_t instance,
                                               const void *user_data);

/* Fills a payload: name, source file, line and column (pass NULL /
 * XPTI_INVALID_LINE for what is unknown) and code address; sets the flags. */
static inline xpti_payload_t xpti_payload_init(const char *name,
                                               const char *source_file,
                                               uint32_t line, uint32_t column,
                                               const void *code_ptr) {
  xpti_payload_t p;
  p.name = name;
  p.stack_trace = NULL;
  p.source_file = source_file;
  p.line_no = line;
  p.column_no = column;
  p.code_ptr_va = code_ptr;
  p.internal = 0;
  p.flags = 0;
  p.uid.p1 = p.uid.p2 = p.uid.p3 = 0;
  if (name) p.flags |= XPTI_PAYLOAD_NAME_AVAILABLE;
  if (source_file) p.flags |= XPTI_PAYLOAD_SOURCE_FILE_AVAILABLE;
  if (line != XPTI_INVALID_LINE) p.flags |= XPTI_PAYLOAD_LINE_INFO_AVAILABLE;
  if (column != XPTI_INVALID_LINE) p.flags |= XPTI_PAYLOAD_COLUMN_INFO_AVAILABLE;
  if (code_ptr) p.flags |= XPTI_PAYLOAD_CODE_POINTER_AVAILABLE;
  return p;
}
#endif /* __cplusplus */

#endif /* XPTI_DATA_TYPES_H */
