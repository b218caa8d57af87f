/*
 * xpti_trace_framework.h — the XPTI tracing API as exported by strobe's
 * dispatcher, libstrobe_xpti.so (crate strobe-xpti), and by the proxy
 * (crates/strobe-xpti/proxy/xpti_proxy.c, built into libxpti.a).
 *
 * Environment:
 *   XPTI_TRACE_ENABLE          unset, 1 or true: on; 0, false, anything else: off
 *   XPTI_FRAMEWORK_DISPATCHER  path of the dispatcher the proxy loads
 *   XPTI_SUBSCRIBERS           comma-separated subscriber libraries; each must
 *                              export xptiTraceInit and xptiTraceFinish
 *
 * Bad input never crashes: null pointers, unknown ids and empty names give
 * XPTI_RC_INVALIDARG / XPTI_RC_NOTFOUND, a null pointer, XPTI_INVALID_*_ID or 0,
 * as documented per function.
 */
#ifndef XPTI_TRACE_FRAMEWORK_H
#define XPTI_TRACE_FRAMEWORK_H

#include "xpti_data_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reference-counted framework start/stop (the framework also starts lazily).
 * Both return XPTI_RC_SUCCESS to callers that read a result. */
XPTI_EXPORT_API void xptiFrameworkInitialize(void);
XPTI_EXPORT_API void xptiFrameworkFinalize(void);

/* Announces a stream to the subscribers (registering it if needed). A repeat
 * before xptiFinalize is not forwarded again. INVALIDARG for a null/empty
 * stream name. */
XPTI_EXPORT_API xpti_result_t xptiInitialize(const char *stream, uint32_t maj,
                                             uint32_t min, const char *version);
/* Tells the subscribers that a stream ends (xptiTraceFinish). */
XPTI_EXPORT_API void xptiFinalize(const char *stream);

/* Whether tracing is on: XPTI_TRACE_ENABLE allows it and a subscriber is
 * loaded (or xptiForceSetTraceEnabled(true)). One atomic load. */
XPTI_EXPORT_API bool xptiTraceEnabled(void);
/* Tracing on and a callback registered for (stream, type); type 0 = any. */
XPTI_EXPORT_API bool xptiCheckTraceEnabled(uint8_t stream, uint16_t type);

/* Stream id (1..254) for a name; XPTI_INVALID_STREAM_ID (255) for a null or
 * empty name or when 254 streams exist. */
XPTI_EXPORT_API uint8_t xptiRegisterStream(const char *stream_name);
/* Removes the stream's callbacks; NOTFOUND for an unknown name or a stream
 * without callbacks. */
XPTI_EXPORT_API xpti_result_t xptiUnregisterStream(const char *stream_name);

/* Interns a string; *table_string receives the stored copy, valid for the
 * process. XPTI_INVALID_STRING_ID for a null/empty string or a null
 * table_string. */
XPTI_EXPORT_API xpti_string_id_t xptiRegisterString(const char *string,
                                                    char **table_string);
/* The stored string of an id, or NULL. */
XPTI_EXPORT_API const char *xptiLookupString(xpti_string_id_t id);

/* Stores a copy of size bytes; XPTI_INVALID_OBJECT_ID for null data. */
XPTI_EXPORT_API xpti_object_id_t xptiRegisterObject(const char *data,
                                                    size_t size, uint8_t type);
/* The object of an id; {0, NULL, 0} when unknown. */
XPTI_EXPORT_API xpti_object_data_t xptiLookupObject(xpti_object_id_t id);

/* Registers a payload: its 64-bit unique id (also written to
 * payload->internal with XPTI_PAYLOAD_HASH_AVAILABLE), or 0 for a null or
 * empty payload. */
XPTI_EXPORT_API uint64_t xptiRegisterPayload(xpti_payload_t *payload);

/* Makes or finds the event of a payload (a null payload name is taken from
 * `name`); *instance_no receives this visit's instance number (1, 2, ...).
 * NULL for a null/empty payload or a null instance_no. */
XPTI_EXPORT_API xpti_trace_event_data_t *
xptiMakeEvent(const char *name, xpti_payload_t *payload, uint16_t event,
              uint16_t activity, uint64_t *instance_no);
/* The event of a unique id, or NULL. */
XPTI_EXPORT_API const xpti_trace_event_data_t *xptiFindEvent(uint64_t uid);
/* The payload of an event (NULL for NULL). */
XPTI_EXPORT_API const xpti_payload_t *
xptiQueryPayload(xpti_trace_event_data_t *event);
/* The payload registered under a unique id, or NULL. */
XPTI_EXPORT_API const xpti_payload_t *xptiQueryPayloadByUID(uint64_t uid);
/* Events live as long as the process in strobe: this does nothing. */
XPTI_EXPORT_API void xptiReleaseEvent(xpti_trace_event_data_t *event);

/* DUPLICATE when cb is already registered for (stream, type); INVALIDARG for
 * a null cb or a stream id never registered. */
XPTI_EXPORT_API xpti_result_t xptiRegisterCallback(
    uint8_t stream_id, uint16_t trace_type, xpti_tracepoint_callback_api_t cb);
/* NOTFOUND when cb is not registered for (stream, type). */
XPTI_EXPORT_API xpti_result_t xptiUnregisterCallback(
    uint8_t stream_id, uint16_t trace_type, xpti_tracepoint_callback_api_t cb);

/* Calls every callback of (stream, type). FALSE when tracing is off;
 * INVALIDARG for a null event unless user_data is non-null and the type is a
 * function, function_with_args, mem_alloc, mem_release, offload_alloc_* or
 * diagnostics type. */
XPTI_EXPORT_API xpti_result_t xptiNotifySubscribers(
    uint8_t stream_id, uint16_t trace_type, xpti_trace_event_data_t *parent,
    xpti_trace_event_data_t *event, uint64_t instance, const void *user_data);

/* Attaches key = object to an event: to its metadata map (xptiQueryMetadata)
 * and, for events made by xptiMakeEvent, beside it (xptiStrobeMetadataAt).
 * INVALIDARG for a null event/key or an unknown object on a framework event;
 * DUPLICATE for a key already present. */
XPTI_EXPORT_API xpti_result_t xptiAddMetadata(xpti_trace_event_data_t *event,
                                              const char *key,
                                              xpti_object_id_t value);
/* strobe extension (upstream exposes a C++ map instead): number of metadata
 * entries of an event (0 for NULL or a foreign event). */
XPTI_EXPORT_API uint32_t
xptiStrobeMetadataCount(const xpti_trace_event_data_t *event);
/* strobe extension: entry `index` (insertion order) as (key string id,
 * object id). INVALIDARG for NULL arguments, NOTFOUND past the end. */
XPTI_EXPORT_API xpti_result_t xptiStrobeMetadataAt(
    const xpti_trace_event_data_t *event, uint32_t index,
    xpti_string_id_t *key, xpti_object_id_t *value);

/* (vendor id << 8) | 0x80 | user value; user values are 0..127 (use
 * XPTI_TRACE_POINT_BEGIN/END). 0 for a null/empty vendor or a value > 127. */
XPTI_EXPORT_API uint16_t xptiRegisterUserDefinedTracePoint(
    const char *tool_name, uint8_t user_defined_tp);
XPTI_EXPORT_API uint16_t xptiRegisterUserDefinedEventType(
    const char *tool_name, uint8_t user_defined_event);

/* Per-thread universal id. */
XPTI_EXPORT_API uint64_t xptiGetUniversalId(void);
XPTI_EXPORT_API void xptiSetUniversalId(uint64_t uid);
/* Per-thread (key, value) stash of depth 1: DUPLICATE when full, INVALIDARG
 * for a null key; the key pointer is kept, not copied. */
XPTI_EXPORT_API xpti_result_t xptiStashTuple(const char *key, uint64_t value);
/* NOTFOUND when nothing is stashed, INVALIDARG for null out-pointers. */
XPTI_EXPORT_API xpti_result_t xptiGetStashedTuple(char **key, uint64_t *value);
XPTI_EXPORT_API void xptiUnstashTuple(void);

/* Process-wide increasing id. */
XPTI_EXPORT_API uint64_t xptiGetUniqueId(void);

/* ---- XPTI 2026.2: tracepoints, scopes, lookups, defaults ---------------
 * A tracepoint is one instance of a code location (function, file, line,
 * column): a C++ interface object (xpti_tracepoint_t below) owning a payload
 * and an event whose unique id is new per instance and whose instance number
 * counts the location's tracepoints. Opaque in C. */
typedef struct xpti_tracepoint_t xpti_tracepoint_t;
typedef struct xpti_trace_event_t xpti_trace_event_t;
typedef struct xpti_payload_if_t xpti_payload_if_t;

/* NULL only when out of memory; a location without name, file or code
 * pointer is named "<unknown>". */
XPTI_EXPORT_API xpti_tracepoint_t *
xptiCreateTracepoint(const char *func_name, const char *file_name,
                     uint32_t line_no, uint32_t column_no, void *code_ptr_va);
/* INVALIDARG for NULL or a pointer that is not a live tracepoint. */
XPTI_EXPORT_API xpti_result_t xptiDeleteTracepoint(xpti_tracepoint_t *tp);
/* xptiCreateTracepoint, remembered for the thread as its pending scope. */
XPTI_EXPORT_API const xpti_tracepoint_t *
xptiRegisterTracepointScope(const char *func_name, const char *file_name,
                            uint32_t line_no, uint32_t column_no,
                            void *code_ptr_va);
/* The thread's scope tracepoint (NULL when none); setting it also sets the
 * thread's universal id to the tracepoint's id (INVALIDARG for NULL);
 * unsetting clears both. */
XPTI_EXPORT_API const xpti_tracepoint_t *xptiGetTracepointScopeData(void);
XPTI_EXPORT_API xpti_result_t xptiSetTracepointScopeData(xpti_tracepoint_t *tp);
XPTI_EXPORT_API void xptiUnsetTracepointScopeData(void);
/* Interface views of an id (a live tracepoint's, or an xptiMakeEvent
 * event's); NULL when unknown. */
XPTI_EXPORT_API const xpti_trace_event_t *xptiLookupEvent(uint64_t uid);
XPTI_EXPORT_API const xpti_payload_if_t *xptiLookupPayload(uint64_t uid);
/* The event's metadata map: in C++ a std::unordered_map<xpti_string_id_t,
 * xpti_object_id_t> * (libstdc++), as upstream declares it. NULL for NULL. */
XPTI_EXPORT_API void *xptiQueryMetadata(xpti_trace_event_data_t *event);
/* Whether tracepoint scopes notify their own begin/end (default off). */
XPTI_EXPORT_API void xptiEnableTracepointScopeNotification(bool yes_no);
XPTI_EXPORT_API bool xptiCheckTracepointScopeNotification(void);
/* Defaults for scoped notifications: stream 0, event type algorithm (2),
 * trace type function_begin (24). Setting INVALIDARG for a stream >= 128 or a
 * type 0. */
XPTI_EXPORT_API uint8_t xptiGetDefaultStreamID(void);
XPTI_EXPORT_API xpti_result_t xptiSetDefaultStreamID(uint8_t stream);
XPTI_EXPORT_API uint16_t xptiGetDefaultEventType(void);
XPTI_EXPORT_API xpti_result_t xptiSetDefaultEventType(uint16_t event_type);
XPTI_EXPORT_API uint16_t xptiGetDefaultTraceType(void);
XPTI_EXPORT_API xpti_result_t xptiSetDefaultTraceType(uint16_t trace_type);
/* The most detail any subscriber asks for on a stream (subscribers may export
 * bool xptiQuerySubscriberStreamDetailLevel(const char *stream, uint8_t *level):
 * 0 none, 1 basic, 2 normal, 3 verbose); 2 when none answers. */
XPTI_EXPORT_API uint8_t xptiGetEffectiveStreamDetailLevel(uint8_t stream);

/* Tests only: start over with empty tables (subscribers stay). */
XPTI_EXPORT_API void xptiReset(void);
/* Tests only: force tracing on/off regardless of environment and subscribers. */
XPTI_EXPORT_API void xptiForceSetTraceEnabled(bool yes_no);

/* Subscriber entry points (implemented by subscribers, not the framework). */
typedef void (*xpti_trace_init_t)(unsigned int major, unsigned int minor,
                                  const char *version, const char *stream);
typedef void (*xpti_trace_finish_t)(const char *stream);

#ifdef __cplusplus
} /* extern "C" */

/* C++ conveniences taking the enum classes, as upstream's examples do. */
inline xpti::trace_event_data_t *
xptiMakeEvent(const char *name, xpti::payload_t *payload,
              xpti::trace_event_type_t event,
              xpti::trace_activity_type_t activity, uint64_t *instance_no) {
  return xptiMakeEvent(name, payload, (uint16_t)event, (uint16_t)activity,
                       instance_no);
}
inline xpti::trace_event_data_t *
xptiMakeEvent(const char *name, xpti::payload_t *payload, uint16_t event,
              xpti::trace_activity_type_t activity, uint64_t *instance_no) {
  return xptiMakeEvent(name, payload, event, (uint16_t)activity, instance_no);
}
inline xpti::result_t
xptiNotifySubscribers(uint8_t stream_id, xpti::trace_point_type_t trace_type,
                      xpti::trace_event_data_t *parent,
                      xpti::trace_event_data_t *event, uint64_t instance,
                      const void *user_data) {
  return (xpti::result_t)xptiNotifySubscribers(
      stream_id, (uint16_t)trace_type, parent, event, instance, user_data);
}
inline xpti::result_t
xptiRegisterCallback(uint8_t stream_id, xpti::trace_point_type_t trace_type,
                     xpti::tracepoint_callback_api_t cb) {
  return (xpti::result_t)xptiRegisterCallback(stream_id, (uint16_t)trace_type,
                                              cb);
}

/* The interfaces of XPTI 2026.2's tracepoint objects (virtual functions in
 * the published order; call them, never derive from them). */
struct xpti_payload_if_t {
  virtual ~xpti_payload_if_t() {}
  virtual const char *name() const = 0;
  virtual const char *source_file() const = 0;
  virtual uint32_t line_no() const = 0;
  virtual uint32_t column_no() const = 0;
  virtual uint64_t payload_flags() const = 0;
  virtual int32_t name_string_id() const = 0;
  virtual int32_t file_string_id() const = 0;
  virtual uint64_t uid64() const = 0;
  virtual bool is_valid() const = 0;
  virtual xpti::payload_t *payload_ref() = 0;
};
struct xpti_metadata_t {
  virtual ~xpti_metadata_t() {}
  /* SUCCESS with the first/next (key string, object id), FALSE at the end. */
  virtual xpti::result_t first_item(char **key, xpti_object_id_t &value) = 0;
  virtual xpti::result_t next_item(char **key, xpti_object_id_t &value) = 0;
  virtual xpti::result_t add_item(const char *key, xpti_object_id_t value) = 0;
  virtual size_t count() = 0;
};
struct xpti_trace_event_t {
  virtual ~xpti_trace_event_t() {}
  virtual xpti_payload_if_t *payload() = 0;
  virtual xpti_metadata_t *metadata() = 0;
  virtual uint64_t uid64() const = 0;
  virtual uint64_t instance() const = 0;
  virtual uint16_t event_type() const = 0;
  virtual uint16_t activity_type() const = 0;
  virtual uint64_t source_uid64() const = 0;
  virtual uint64_t target_uid64() const = 0;
  virtual uint64_t event_flags() const = 0;
  virtual void set_activity_type(xpti::trace_activity_type_t type) = 0;
  virtual void set_event_type(uint16_t type) = 0;
  virtual xpti::payload_t *payload_ref() = 0;
  virtual xpti::trace_event_data_t *event_ref() = 0;
};
struct xpti_tracepoint_t {
  virtual ~xpti_tracepoint_t() {}
  virtual xpti_payload_if_t *payload() = 0;
  virtual xpti_metadata_t *metadata() = 0;
  virtual xpti_trace_event_t *event() = 0;
  virtual uint64_t uid64() const = 0;
  virtual uint64_t instance() const = 0;
  virtual xpti::trace_event_data_t *event_ref() = 0;
  virtual xpti::payload_t *payload_ref() = 0;
};

namespace xpti {
namespace framework {
/* Sends `type` now and `type | 1` (its end) when the scope ends, if tracing
 * is on. */
class scoped_notify {
public:
  scoped_notify(const char *stream, trace_point_type_t type,
                trace_event_data_t *parent, trace_event_data_t *object,
                uint64_t instance, const void *user_data = nullptr)
      : m_parent(parent), m_object(object), m_instance(instance),
        m_user_data(user_data), m_type((uint16_t)type) {
    if (xptiTraceEnabled() && stream) {
      m_stream = xptiRegisterStream(stream);
      m_armed = xptiNotifySubscribers(m_stream, m_type, m_parent, m_object,
                                      m_instance, m_user_data) ==
                XPTI_RC_SUCCESS;
    }
  }
  ~scoped_notify() {
    if (m_armed)
      xptiNotifySubscribers(m_stream, (uint16_t)(m_type | 1), m_parent,
                            m_object, m_instance, m_user_data);
  }
  scoped_notify(const scoped_notify &) = delete;
  scoped_notify &operator=(const scoped_notify &) = delete;

private:
  trace_event_data_t *m_parent;
  trace_event_data_t *m_object;
  uint64_t m_instance;
  const void *m_user_data;
  uint16_t m_type;
  uint8_t m_stream = 0;
  bool m_armed = false;
};
} // namespace framework
} // namespace xpti
#endif /* __cplusplus */

#endif /* XPTI_TRACE_FRAMEWORK_H */
