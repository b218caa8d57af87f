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

/* Reference-counted framework start/stop (the framework also starts lazily). */
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

/* Stream id (1..255) for a name; XPTI_INVALID_STREAM_ID (0) for a null or
 * empty name or when 255 streams exist. */
XPTI_EXPORT_API uint8_t xptiRegisterStream(const char *stream_name);
/* Removes the stream's callbacks; NOTFOUND for an unknown name. */
XPTI_EXPORT_API xpti_result_t xptiUnregisterStream(const char *stream_name);

/* Interns a string; *table_string (if non-null) receives the stored copy,
 * valid for the process. XPTI_INVALID_STRING_ID for null/empty input. */
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
 * `name`); *instance_no (if non-null) receives this visit's instance number
 * (1, 2, ...). NULL for a null/empty payload. */
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

/* Attaches key = object to an event made by the framework. INVALIDARG for a
 * null event/key, an unknown object or a foreign event; DUPLICATE for a key
 * already present. */
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
