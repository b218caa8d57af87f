/* Exercises the XPTI C ABI of libstrobe_xpti.so through the public header:
 * layouts, every function, and bad input. Prints "ABI OK" on success; on
 * failure prints the failing check and exits 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <pthread.h>

#include "xpti/xpti_trace_framework.h"

_Static_assert(sizeof(xpti_uid_t) == 24, "uid_t is 24 bytes");
_Static_assert(sizeof(xpti_payload_t) == 80, "payload_t is 80 bytes");
_Static_assert(offsetof(xpti_payload_t, line_no) == 24, "line_no offset");
_Static_assert(offsetof(xpti_payload_t, code_ptr_va) == 32, "code_ptr_va offset");
_Static_assert(offsetof(xpti_payload_t, internal) == 40, "internal offset");
_Static_assert(offsetof(xpti_payload_t, flags) == 48, "flags offset");
_Static_assert(offsetof(xpti_payload_t, uid) == 56, "uid offset");
_Static_assert(sizeof(xpti_trace_event_data_t) == 128, "trace_event_data_t is 128 bytes");
_Static_assert(offsetof(xpti_trace_event_data_t, instance_id) == 16, "instance_id offset");
_Static_assert(offsetof(xpti_trace_event_data_t, event_type) == 24, "event_type offset");
_Static_assert(offsetof(xpti_trace_event_data_t, activity_type) == 26, "activity_type offset");
_Static_assert(offsetof(xpti_trace_event_data_t, source_id) == 32, "source_id offset");
_Static_assert(offsetof(xpti_trace_event_data_t, reserved) == 48, "reserved offset");
_Static_assert(offsetof(xpti_trace_event_data_t, global_user_data) == 112, "global_user_data offset");
_Static_assert(offsetof(xpti_trace_event_data_t, flags) == 120, "flags offset");
_Static_assert(sizeof(xpti_object_data_t) == 24, "object_data_t is 24 bytes");

static int failures;
#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "CHECK FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond);  \
      failures++;                                                              \
    }                                                                          \
  } while (0)

static uint64_t g_calls, g_last_instance, g_last_parent, g_last_uid;
static const void *g_last_user;
static uint16_t g_last_type;

static void cb_record(uint16_t type, xpti_trace_event_data_t *parent,
                      xpti_trace_event_data_t *event, uint64_t instance,
                      const void *user) {
  g_calls++;
  g_last_type = type;
  g_last_parent = parent ? parent->unique_id : 0;
  g_last_uid = event ? event->unique_id : 0;
  g_last_instance = instance;
  g_last_user = user;
}
static void cb_other(uint16_t t, xpti_trace_event_data_t *p,
                     xpti_trace_event_data_t *e, uint64_t i, const void *u) {
  (void)t; (void)p; (void)e; (void)i; (void)u;
}

static xpti_trace_event_data_t *g_thread_event;
static void *make_in_thread(void *arg) {
  (void)arg;
  for (int i = 0; i < 1000; i++) {
    xpti_payload_t p = xpti_payload_init("threaded", "t.c", 1, 1, NULL);
    uint64_t inst = 0;
    xpti_trace_event_data_t *e = xptiMakeEvent(NULL, &p, 0, 0, &inst);
    if (!e || (g_thread_event && e != g_thread_event)) abort();
    g_thread_event = e;
  }
  return NULL;
}

int main(void) {
  xptiFrameworkInitialize();
  /* No subscribers loaded: tracing is off until forced. */
  CHECK(!xptiTraceEnabled());
  xptiForceSetTraceEnabled(true);
  CHECK(xptiTraceEnabled());

  /* Streams. */
  uint8_t s = xptiRegisterStream("abi.stream");
  CHECK(s != XPTI_INVALID_STREAM_ID);
  CHECK(xptiRegisterStream("abi.stream") == s);
  CHECK(xptiRegisterStream("other") != s);
  CHECK(xptiRegisterStream(NULL) == XPTI_INVALID_STREAM_ID);
  CHECK(xptiRegisterStream("") == XPTI_INVALID_STREAM_ID);
  CHECK(xptiInitialize("abi.stream", 1, 0, "1.0") == XPTI_RC_SUCCESS);
  CHECK(xptiInitialize(NULL, 1, 0, "1.0") == XPTI_RC_INVALIDARG);
  CHECK(xptiRegisterStream(NULL) == 255); /* Intel's invalid_id<uint8_t> */
  CHECK(xptiUnregisterStream("never-registered") == XPTI_RC_NOTFOUND);
  /* A stream nobody subscribed to has nothing to unregister (as Intel's). */
  CHECK(xptiUnregisterStream("other") == XPTI_RC_NOTFOUND);
  CHECK(xptiUnregisterStream(NULL) == XPTI_RC_INVALIDARG);
  xptiFinalize(NULL);

  /* Strings. */
  char *stored = NULL;
  xpti_string_id_t sid = xptiRegisterString("hello", &stored);
  CHECK(sid != XPTI_INVALID_STRING_ID);
  CHECK(stored && strcmp(stored, "hello") == 0);
  char *stored2 = NULL;
  CHECK(xptiRegisterString("hello", &stored2) == sid && stored2 == stored);
  CHECK(xptiLookupString(sid) == stored);
  CHECK(xptiLookupString(123456) == NULL);
  CHECK(xptiLookupString(XPTI_INVALID_STRING_ID) == NULL);
  CHECK(xptiRegisterString(NULL, &stored) == XPTI_INVALID_STRING_ID);
  CHECK(xptiRegisterString("", NULL) == XPTI_INVALID_STRING_ID);
  /* Intel's framework needs the place for the stored copy. */
  CHECK(xptiRegisterString("hello", NULL) == XPTI_INVALID_STRING_ID);

  /* Objects. */
  xpti_object_id_t oid = xptiRegisterObject("abc", 3, xpti_metadata_string);
  CHECK(oid != XPTI_INVALID_OBJECT_ID);
  xpti_object_data_t od = xptiLookupObject(oid);
  CHECK(od.size == 3 && memcmp(od.data, "abc", 3) == 0 && od.type == xpti_metadata_string);
  od = xptiLookupObject(99999);
  CHECK(od.size == 0 && od.data == NULL);
  CHECK(xptiRegisterObject(NULL, 4, 0) == XPTI_INVALID_OBJECT_ID);

  /* Payloads and events. */
  xpti_payload_t p = xpti_payload_init("function1", "main.cpp", 104, 2, (const void *)&main);
  uint64_t uid = xptiRegisterPayload(&p);
  CHECK(uid != XPTI_INVALID_UID);
  CHECK(p.internal == uid && (p.flags & XPTI_PAYLOAD_HASH_AVAILABLE));
  uint64_t i1 = 0, i2 = 0;
  xpti_payload_t pa = xpti_payload_init("function1", "main.cpp", 104, 2, (const void *)&main);
  xpti_trace_event_data_t *e1 = xptiMakeEvent("function1", &pa, xpti_event_algorithm, xpti_activity_active, &i1);
  xpti_payload_t pb = xpti_payload_init("function1", "main.cpp", 104, 2, (const void *)&main);
  xpti_trace_event_data_t *e2 = xptiMakeEvent("function1", &pb, xpti_event_algorithm, xpti_activity_active, &i2);
  CHECK(e1 && e1 == e2);
  CHECK(e1->unique_id == uid);
  CHECK(i1 == 1 && i2 == 2);
  CHECK(e1->event_type == xpti_event_algorithm && e1->activity_type == xpti_activity_active);
  CHECK(e1->flags & XPTI_EVENT_UID_AVAILABLE);
  CHECK((uint64_t)(uintptr_t)e1 != e1->unique_id);
  CHECK(xptiFindEvent(uid) == e1);
  CHECK(xptiFindEvent(0) == NULL);
  CHECK(xptiFindEvent(0xdeadbeefULL) == NULL);
  const xpti_payload_t *qp = xptiQueryPayload(e1);
  CHECK(qp && strcmp(qp->name, "function1") == 0 && strcmp(qp->source_file, "main.cpp") == 0);
  CHECK(qp->line_no == 104 && qp->column_no == 2 && qp->code_ptr_va == (const void *)&main);
  CHECK(xptiQueryPayloadByUID(uid) == qp);
  CHECK(xptiQueryPayloadByUID(777777) == NULL);
  CHECK(xptiQueryPayload(NULL) == NULL);
  /* Name taken from the argument when the payload has none. */
  xpti_payload_t anon = xpti_payload_init(NULL, NULL, XPTI_INVALID_LINE, XPTI_INVALID_LINE, NULL);
  uint64_t named_inst = 0;
  xpti_trace_event_data_t *named = xptiMakeEvent("by_arg", &anon, 0, 0, &named_inst);
  /* Intel's framework answers NULL without a place for the instance. */
  CHECK(xptiMakeEvent("by_arg", &anon, 0, 0, NULL) == NULL);
  CHECK(named && strcmp(xptiQueryPayload(named)->name, "by_arg") == 0);
  CHECK(xptiMakeEvent(NULL, NULL, 0, 0, NULL) == NULL);
  xpti_payload_t empty = xpti_payload_init(NULL, NULL, XPTI_INVALID_LINE, XPTI_INVALID_LINE, NULL);
  CHECK(xptiMakeEvent(NULL, &empty, 0, 0, NULL) == NULL);
  CHECK(xptiRegisterPayload(NULL) == XPTI_INVALID_UID);
  xptiReleaseEvent(e1);
  xptiReleaseEvent(NULL);
  CHECK(xptiFindEvent(uid) == e1);

  /* Concurrent creation from two threads yields one event. */
  pthread_t th[2];
  for (int t = 0; t < 2; t++) pthread_create(&th[t], NULL, make_in_thread, NULL);
  for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
  CHECK(g_thread_event && g_thread_event->instance_id == 2000);

  /* Callbacks. */
  CHECK(xptiRegisterCallback(s, xpti_tp_task_begin, cb_record) == XPTI_RC_SUCCESS);
  CHECK(xptiRegisterCallback(s, xpti_tp_task_begin, cb_record) == XPTI_RC_DUPLICATE);
  CHECK(xptiRegisterCallback(s, xpti_tp_task_begin, cb_other) == XPTI_RC_SUCCESS);
  CHECK(xptiRegisterCallback(s, xpti_tp_task_begin, NULL) == XPTI_RC_INVALIDARG);
  CHECK(xptiRegisterCallback(250, xpti_tp_task_begin, cb_record) == XPTI_RC_INVALIDARG);
  CHECK(xptiRegisterCallback(0, xpti_tp_task_begin, cb_record) == XPTI_RC_INVALIDARG);
  CHECK(xptiUnregisterCallback(s, xpti_tp_task_end, cb_record) == XPTI_RC_NOTFOUND);
  CHECK(xptiUnregisterCallback(200, xpti_tp_task_end, cb_record) == XPTI_RC_NOTFOUND);
  CHECK(xptiUnregisterCallback(s, xpti_tp_task_begin, cb_other) == XPTI_RC_SUCCESS);
  CHECK(xptiUnregisterCallback(s, xpti_tp_task_begin, cb_other) == XPTI_RC_NOTFOUND);
  CHECK(xptiCheckTraceEnabled(s, 0));
  CHECK(xptiCheckTraceEnabled(s, xpti_tp_task_begin));
  CHECK(!xptiCheckTraceEnabled(s, xpti_tp_task_end));

  /* Notification. */
  xpti_payload_t gp = xpti_payload_init("graph", NULL, XPTI_INVALID_LINE, XPTI_INVALID_LINE, NULL);
  uint64_t graph_inst = 0;
  xpti_trace_event_data_t *graph = xptiMakeEvent(NULL, &gp, xpti_event_graph, xpti_activity_active, &graph_inst);
  int ud = 7;
  CHECK(xptiNotifySubscribers(s, xpti_tp_task_begin, graph, e1, 42, &ud) == XPTI_RC_SUCCESS);
  CHECK(g_calls == 1 && g_last_type == xpti_tp_task_begin && g_last_uid == uid &&
        g_last_parent == graph->unique_id && g_last_instance == 42 && g_last_user == &ud);
  /* A stack event of the caller's own is passed through. */
  xpti_trace_event_data_t mine;
  memset(&mine, 0, sizeof mine);
  mine.unique_id = 99;
  CHECK(xptiNotifySubscribers(s, xpti_tp_task_begin, NULL, &mine, 1, NULL) == XPTI_RC_SUCCESS);
  CHECK(g_calls == 2 && g_last_uid == 99);
  /* Types without callbacks and streams never registered: success, nothing delivered. */
  CHECK(xptiNotifySubscribers(s, xpti_tp_task_end, NULL, e1, 1, NULL) == XPTI_RC_SUCCESS);
  CHECK(xptiNotifySubscribers(222, xpti_tp_task_begin, NULL, e1, 1, NULL) == XPTI_RC_SUCCESS);
  CHECK(g_calls == 2);
  /* Null events. */
  CHECK(xptiNotifySubscribers(s, xpti_tp_task_begin, NULL, NULL, 1, &ud) == XPTI_RC_INVALIDARG);
  CHECK(xptiNotifySubscribers(s, xpti_tp_function_begin, NULL, NULL, 1, NULL) == XPTI_RC_INVALIDARG);
  CHECK(xptiNotifySubscribers(s, xpti_tp_function_begin, NULL, NULL, 1, &ud) == XPTI_RC_SUCCESS);
  CHECK(xptiNotifySubscribers(s, xpti_tp_diagnostics, NULL, NULL, 1, &ud) == XPTI_RC_SUCCESS);
  /* Disabled: FALSE and nothing delivered. */
  xptiForceSetTraceEnabled(false);
  CHECK(!xptiTraceEnabled());
  CHECK(!xptiCheckTraceEnabled(s, 0));
  CHECK(xptiNotifySubscribers(s, xpti_tp_task_begin, NULL, e1, 1, NULL) == XPTI_RC_FALSE);
  CHECK(g_calls == 2);
  xptiForceSetTraceEnabled(true);

  /* Metadata through functions. */
  xpti_object_id_t v1 = xptiRegisterObject("saxpy", 5, xpti_metadata_string);
  CHECK(xptiAddMetadata(e1, "kernel", v1) == XPTI_RC_SUCCESS);
  CHECK(xptiAddMetadata(e1, "kernel", v1) == XPTI_RC_DUPLICATE);
  CHECK(xptiAddMetadata(e1, NULL, v1) == XPTI_RC_INVALIDARG);
  CHECK(xptiAddMetadata(NULL, "k", v1) == XPTI_RC_INVALIDARG);
  CHECK(xptiAddMetadata(e1, "bad", 424242) == XPTI_RC_INVALIDARG);
  /* A caller's own event gets metadata in its map only. */
  CHECK(xptiAddMetadata(&mine, "k", v1) == XPTI_RC_SUCCESS);
  CHECK(xptiAddMetadata(&mine, "k", v1) == XPTI_RC_DUPLICATE);
  CHECK(xptiQueryMetadata(&mine) != NULL);
  CHECK(xptiStrobeMetadataCount(&mine) == 0);
  CHECK(xptiQueryMetadata(NULL) == NULL);
  CHECK(xptiStrobeMetadataCount(e1) == 1);
  CHECK(xptiStrobeMetadataCount(NULL) == 0);
  xpti_string_id_t mk; xpti_object_id_t mv;
  CHECK(xptiStrobeMetadataAt(e1, 0, &mk, &mv) == XPTI_RC_SUCCESS);
  CHECK(strcmp(xptiLookupString(mk), "kernel") == 0 && mv == v1);
  CHECK(xptiStrobeMetadataAt(e1, 1, &mk, &mv) == XPTI_RC_NOTFOUND);
  CHECK(xptiStrobeMetadataAt(e1, 0, NULL, &mv) == XPTI_RC_INVALIDARG);
  CHECK(xptiStrobeMetadataAt(NULL, 0, &mk, &mv) == XPTI_RC_INVALIDARG);

  /* User-defined types. */
  enum { my_read_begin = XPTI_TRACE_POINT_BEGIN(0), my_read_end = XPTI_TRACE_POINT_END(0),
         my_alloc_begin = XPTI_TRACE_POINT_BEGIN(1) };
  uint16_t rb = xptiRegisterUserDefinedTracePoint("myTest", my_read_begin);
  uint16_t re = xptiRegisterUserDefinedTracePoint("myTest", my_read_end);
  uint16_t ab = xptiRegisterUserDefinedTracePoint("myTest", my_alloc_begin);
  uint16_t other = xptiRegisterUserDefinedTracePoint("otherTool", my_read_begin);
  CHECK(rb != 0 && XPTI_TOOL_ID(rb) != 0 && XPTI_TOOL_ID(rb) == XPTI_TOOL_ID(re));
  CHECK(XPTI_TOOL_ID(other) != XPTI_TOOL_ID(rb));
  CHECK(XPTI_EXTRACT_USER_DEFINED_ID(rb) == my_read_begin);
  CHECK(XPTI_EXTRACT_USER_DEFINED_ID(re) == my_read_end);
  CHECK(XPTI_EXTRACT_USER_DEFINED_ID(ab) == my_alloc_begin);
  CHECK(xptiRegisterUserDefinedTracePoint("myTest", my_read_begin) == rb);
  CHECK(xptiRegisterUserDefinedTracePoint(NULL, 1) == 0);
  CHECK(xptiRegisterUserDefinedTracePoint("", 1) == 0);
  CHECK(xptiRegisterUserDefinedTracePoint("myTest", 200) == 0);
  uint16_t evt = xptiRegisterUserDefinedEventType("myTest", XPTI_EVENT(0));
  CHECK(evt != 0 && XPTI_TOOL_ID(evt) == XPTI_TOOL_ID(rb));
  CHECK(xptiRegisterCallback(s, re, cb_record) == XPTI_RC_SUCCESS);
  CHECK(xptiNotifySubscribers(s, re, NULL, e1, 5, NULL) == XPTI_RC_SUCCESS);
  CHECK(g_last_type == re && g_last_instance == 5);

  /* Per-thread state. */
  CHECK(xptiGetUniversalId() == 0);
  xptiSetUniversalId(1234);
  CHECK(xptiGetUniversalId() == 1234);
  char *k = NULL; uint64_t v = 0;
  CHECK(xptiGetStashedTuple(&k, &v) == XPTI_RC_NOTFOUND);
  CHECK(xptiStashTuple("corr", 77) == XPTI_RC_SUCCESS);
  CHECK(xptiStashTuple("again", 1) == XPTI_RC_DUPLICATE);
  CHECK(xptiGetStashedTuple(&k, &v) == XPTI_RC_SUCCESS && strcmp(k, "corr") == 0 && v == 77);
  CHECK(xptiGetStashedTuple(NULL, &v) == XPTI_RC_INVALIDARG);
  CHECK(xptiStashTuple(NULL, 1) == XPTI_RC_INVALIDARG);
  xptiUnstashTuple();
  xptiUnstashTuple();
  CHECK(xptiGetStashedTuple(&k, &v) == XPTI_RC_NOTFOUND);
  uint64_t u1 = xptiGetUniqueId(), u2 = xptiGetUniqueId();
  CHECK(u2 > u1);

  /* Reset: tables start over, old pointers stay readable. */
  xptiReset();
  CHECK(xptiFindEvent(uid) == NULL);
  CHECK(strcmp(qp->name, "function1") == 0);
  CHECK(xptiTraceEnabled());
  xptiFrameworkFinalize();

  if (failures) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("ABI OK\n");
  return 0;
}
