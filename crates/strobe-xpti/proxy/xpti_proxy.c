/*
 * xpti_proxy.c — the XPTI proxy ("libxpti.a"): link it into an instrumented
 * program or library instead of libstrobe_xpti.so. Every call returns at once
 * (with the "nothing happened" value) unless tracing is enabled and a
 * dispatcher is found:
 *
 *   XPTI_TRACE_ENABLE          unset, 1 or true: may trace; anything else: off
 *   XPTI_FRAMEWORK_DISPATCHER  path of the dispatcher (e.g. libstrobe_xpti.so)
 *
 * On first use the proxy dlopens the dispatcher (RTLD_NOW | RTLD_GLOBAL, so
 * subscribers it loads resolve xpti* against it) and dlsyms every function
 * once; afterwards each call is one predictable branch plus an indirect call.
 *
 * Build the static library:
 *   cc -O2 -fPIC -Iinclude -c crates/strobe-xpti/proxy/xpti_proxy.c -o xpti_proxy.o
 *   ar rcs libxpti.a xpti_proxy.o
 * and link programs with  -L. -lxpti -ldl -lpthread  (glibc >= 2.34 needs no -ldl).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "xpti/xpti_trace_framework.h"

#define XPTI_PROXY_FUNCTIONS(X)                                                \
  X(xptiFrameworkInitialize, void, (void))                                     \
  X(xptiFrameworkFinalize, void, (void))                                       \
  X(xptiInitialize, xpti_result_t,                                             \
    (const char *, uint32_t, uint32_t, const char *))                          \
  X(xptiFinalize, void, (const char *))                                        \
  X(xptiTraceEnabled, bool, (void))                                            \
  X(xptiCheckTraceEnabled, bool, (uint8_t, uint16_t))                          \
  X(xptiRegisterStream, uint8_t, (const char *))                               \
  X(xptiUnregisterStream, xpti_result_t, (const char *))                       \
  X(xptiRegisterString, xpti_string_id_t, (const char *, char **))             \
  X(xptiLookupString, const char *, (xpti_string_id_t))                        \
  X(xptiRegisterObject, xpti_object_id_t, (const char *, size_t, uint8_t))     \
  X(xptiLookupObject, xpti_object_data_t, (xpti_object_id_t))                  \
  X(xptiRegisterPayload, uint64_t, (xpti_payload_t *))                         \
  X(xptiMakeEvent, xpti_trace_event_data_t *,                                  \
    (const char *, xpti_payload_t *, uint16_t, uint16_t, uint64_t *))          \
  X(xptiFindEvent, const xpti_trace_event_data_t *, (uint64_t))                \
  X(xptiQueryPayload, const xpti_payload_t *, (xpti_trace_event_data_t *))     \
  X(xptiQueryPayloadByUID, const xpti_payload_t *, (uint64_t))                 \
  X(xptiReleaseEvent, void, (xpti_trace_event_data_t *))                       \
  X(xptiRegisterCallback, xpti_result_t,                                       \
    (uint8_t, uint16_t, xpti_tracepoint_callback_api_t))                       \
  X(xptiUnregisterCallback, xpti_result_t,                                     \
    (uint8_t, uint16_t, xpti_tracepoint_callback_api_t))                       \
  X(xptiNotifySubscribers, xpti_result_t,                                      \
    (uint8_t, uint16_t, xpti_trace_event_data_t *, xpti_trace_event_data_t *,  \
     uint64_t, const void *))                                                  \
  X(xptiAddMetadata, xpti_result_t,                                            \
    (xpti_trace_event_data_t *, const char *, xpti_object_id_t))               \
  X(xptiStrobeMetadataCount, uint32_t, (const xpti_trace_event_data_t *))      \
  X(xptiStrobeMetadataAt, xpti_result_t,                                       \
    (const xpti_trace_event_data_t *, uint32_t, xpti_string_id_t *,            \
     xpti_object_id_t *))                                                      \
  X(xptiRegisterUserDefinedTracePoint, uint16_t, (const char *, uint8_t))      \
  X(xptiRegisterUserDefinedEventType, uint16_t, (const char *, uint8_t))       \
  X(xptiGetUniversalId, uint64_t, (void))                                      \
  X(xptiSetUniversalId, void, (uint64_t))                                      \
  X(xptiStashTuple, xpti_result_t, (const char *, uint64_t))                   \
  X(xptiGetStashedTuple, xpti_result_t, (char **, uint64_t *))                 \
  X(xptiUnstashTuple, void, (void))                                            \
  X(xptiGetUniqueId, uint64_t, (void))                                         \
  X(xptiReset, void, (void))                                                   \
  X(xptiForceSetTraceEnabled, void, (bool))

/* One pointer per function, filled once. */
#define XPTI_PROXY_FIELD(name, ret, args) ret(*name) args;
static struct {
  XPTI_PROXY_FUNCTIONS(XPTI_PROXY_FIELD)
} g_fn;
static int g_loaded; /* 1 once every function was resolved */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static int env_allows_tracing(void) {
  const char *v = getenv("XPTI_TRACE_ENABLE");
  if (!v) return 1;
  return strcmp(v, "1") == 0 || strcmp(v, "true") == 0;
}

static void xpti_proxy_load(void) {
  const char *path = getenv("XPTI_FRAMEWORK_DISPATCHER");
  if (!env_allows_tracing() || !path || !*path) return;
  void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (!h) return;
  int ok = 1;
#define XPTI_PROXY_SYM(name, ret, args)                                        \
  *(void **)(&g_fn.name) = dlsym(h, #name);                                    \
  if (!g_fn.name) ok = 0;
  XPTI_PROXY_FUNCTIONS(XPTI_PROXY_SYM)
  if (!ok) {
    memset(&g_fn, 0, sizeof g_fn);
    dlclose(h);
    return;
  }
  __atomic_store_n(&g_loaded, 1, __ATOMIC_RELEASE);
}

static inline int xpti_proxy_ready(void) {
  if (__builtin_expect(__atomic_load_n(&g_loaded, __ATOMIC_ACQUIRE), 1))
    return 1;
  pthread_once(&g_once, xpti_proxy_load);
  return __atomic_load_n(&g_loaded, __ATOMIC_ACQUIRE);
}

void xptiFrameworkInitialize(void) {
  if (xpti_proxy_ready()) g_fn.xptiFrameworkInitialize();
}
void xptiFrameworkFinalize(void) {
  if (xpti_proxy_ready()) g_fn.xptiFrameworkFinalize();
}
xpti_result_t xptiInitialize(const char *s, uint32_t maj, uint32_t min,
                             const char *v) {
  return xpti_proxy_ready() ? g_fn.xptiInitialize(s, maj, min, v)
                            : XPTI_RC_FALSE;
}
void xptiFinalize(const char *s) {
  if (xpti_proxy_ready()) g_fn.xptiFinalize(s);
}
bool xptiTraceEnabled(void) {
  return xpti_proxy_ready() ? g_fn.xptiTraceEnabled() : false;
}
bool xptiCheckTraceEnabled(uint8_t s, uint16_t t) {
  return xpti_proxy_ready() ? g_fn.xptiCheckTraceEnabled(s, t) : false;
}
uint8_t xptiRegisterStream(const char *n) {
  return xpti_proxy_ready() ? g_fn.xptiRegisterStream(n)
                            : XPTI_INVALID_STREAM_ID;
}
xpti_result_t xptiUnregisterStream(const char *n) {
  return xpti_proxy_ready() ? g_fn.xptiUnregisterStream(n) : XPTI_RC_FALSE;
}
xpti_string_id_t xptiRegisterString(const char *s, char **t) {
  return xpti_proxy_ready() ? g_fn.xptiRegisterString(s, t)
                            : XPTI_INVALID_STRING_ID;
}
const char *xptiLookupString(xpti_string_id_t id) {
  return xpti_proxy_ready() ? g_fn.xptiLookupString(id) : NULL;
}
xpti_object_id_t xptiRegisterObject(const char *d, size_t n, uint8_t t) {
  return xpti_proxy_ready() ? g_fn.xptiRegisterObject(d, n, t)
                            : XPTI_INVALID_OBJECT_ID;
}
xpti_object_data_t xptiLookupObject(xpti_object_id_t id) {
  xpti_object_data_t none = {0, NULL, 0};
  return xpti_proxy_ready() ? g_fn.xptiLookupObject(id) : none;
}
uint64_t xptiRegisterPayload(xpti_payload_t *p) {
  return xpti_proxy_ready() ? g_fn.xptiRegisterPayload(p) : XPTI_INVALID_UID;
}
xpti_trace_event_data_t *xptiMakeEvent(const char *n, xpti_payload_t *p,
                                       uint16_t e, uint16_t a, uint64_t *i) {
  return xpti_proxy_ready() ? g_fn.xptiMakeEvent(n, p, e, a, i) : NULL;
}
const xpti_trace_event_data_t *xptiFindEvent(uint64_t uid) {
  return xpti_proxy_ready() ? g_fn.xptiFindEvent(uid) : NULL;
}
const xpti_payload_t *xptiQueryPayload(xpti_trace_event_data_t *e) {
  return xpti_proxy_ready() ? g_fn.xptiQueryPayload(e) : NULL;
}
const xpti_payload_t *xptiQueryPayloadByUID(uint64_t uid) {
  return xpti_proxy_ready() ? g_fn.xptiQueryPayloadByUID(uid) : NULL;
}
void xptiReleaseEvent(xpti_trace_event_data_t *e) {
  if (xpti_proxy_ready()) g_fn.xptiReleaseEvent(e);
}
xpti_result_t xptiRegisterCallback(uint8_t s, uint16_t t,
                                   xpti_tracepoint_callback_api_t cb) {
  return xpti_proxy_ready() ? g_fn.xptiRegisterCallback(s, t, cb)
                            : XPTI_RC_FALSE;
}
xpti_result_t xptiUnregisterCallback(uint8_t s, uint16_t t,
                                     xpti_tracepoint_callback_api_t cb) {
  return xpti_proxy_ready() ? g_fn.xptiUnregisterCallback(s, t, cb)
                            : XPTI_RC_FALSE;
}
xpti_result_t xptiNotifySubscribers(uint8_t s, uint16_t t,
                                    xpti_trace_event_data_t *p,
                                    xpti_trace_event_data_t *e, uint64_t i,
                                    const void *u) {
  return xpti_proxy_ready() ? g_fn.xptiNotifySubscribers(s, t, p, e, i, u)
                            : XPTI_RC_FALSE;
}
xpti_result_t xptiAddMetadata(xpti_trace_event_data_t *e, const char *k,
                              xpti_object_id_t v) {
  return xpti_proxy_ready() ? g_fn.xptiAddMetadata(e, k, v) : XPTI_RC_FALSE;
}
uint32_t xptiStrobeMetadataCount(const xpti_trace_event_data_t *e) {
  return xpti_proxy_ready() ? g_fn.xptiStrobeMetadataCount(e) : 0;
}
xpti_result_t xptiStrobeMetadataAt(const xpti_trace_event_data_t *e,
                                   uint32_t i, xpti_string_id_t *k,
                                   xpti_object_id_t *v) {
  return xpti_proxy_ready() ? g_fn.xptiStrobeMetadataAt(e, i, k, v)
                            : XPTI_RC_FALSE;
}
uint16_t xptiRegisterUserDefinedTracePoint(const char *n, uint8_t v) {
  return xpti_proxy_ready() ? g_fn.xptiRegisterUserDefinedTracePoint(n, v) : 0;
}
uint16_t xptiRegisterUserDefinedEventType(const char *n, uint8_t v) {
  return xpti_proxy_ready() ? g_fn.xptiRegisterUserDefinedEventType(n, v) : 0;
}
uint64_t xptiGetUniversalId(void) {
  return xpti_proxy_ready() ? g_fn.xptiGetUniversalId() : 0;
}
void xptiSetUniversalId(uint64_t uid) {
  if (xpti_proxy_ready()) g_fn.xptiSetUniversalId(uid);
}
xpti_result_t xptiStashTuple(const char *k, uint64_t v) {
  return xpti_proxy_ready() ? g_fn.xptiStashTuple(k, v) : XPTI_RC_FALSE;
}
xpti_result_t xptiGetStashedTuple(char **k, uint64_t *v) {
  return xpti_proxy_ready() ? g_fn.xptiGetStashedTuple(k, v) : XPTI_RC_FALSE;
}
void xptiUnstashTuple(void) {
  if (xpti_proxy_ready()) g_fn.xptiUnstashTuple();
}
uint64_t xptiGetUniqueId(void) {
  return xpti_proxy_ready() ? g_fn.xptiGetUniqueId() : 0;
}
void xptiReset(void) {
  if (xpti_proxy_ready()) g_fn.xptiReset();
}
void xptiForceSetTraceEnabled(bool on) {
  if (xpti_proxy_ready()) g_fn.xptiForceSetTraceEnabled(on);
}
