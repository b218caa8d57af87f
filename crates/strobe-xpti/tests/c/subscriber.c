/* A subscriber library built by the tests: subscribes to stream "foo" and
 * prints one line per notification to stdout (flushed). Links against no
 * xpti library: the dispatcher's symbols are resolved at load time. */
#include <stdio.h>
#include <string.h>

#include "xpti/xpti_trace_framework.h"

static uint8_t g_stream;

static void on_event(uint16_t type, xpti_trace_event_data_t *parent,
                     xpti_trace_event_data_t *event, uint64_t instance,
                     const void *user) {
  const xpti_payload_t *p = xptiQueryPayload(event);
  printf("cb type=%u uid=%llu parent=%llu instance=%llu name=%s file=%s line=%u user=%s",
         type, (unsigned long long)(event ? event->unique_id : 0),
         (unsigned long long)(parent ? parent->unique_id : 0),
         (unsigned long long)instance, p && p->name ? p->name : "-",
         p && p->source_file ? p->source_file : "-", p ? p->line_no : 0,
         user ? (const char *)user : "-");
  uint32_t n = xptiStrobeMetadataCount(event);
  for (uint32_t i = 0; i < n; i++) {
    xpti_string_id_t k;
    xpti_object_id_t v;
    if (xptiStrobeMetadataAt(event, i, &k, &v) == XPTI_RC_SUCCESS) {
      xpti_object_data_t o = xptiLookupObject(v);
      printf(" %s=%.*s", xptiLookupString(k), (int)o.size, o.data);
    }
  }
  printf("\n");
  fflush(stdout);
}

XPTI_CALLBACK_API void xptiTraceInit(unsigned int major, unsigned int minor,
                                     const char *version, const char *stream) {
  printf("init stream=%s major=%u minor=%u version=%s\n", stream, major, minor,
         version);
  fflush(stdout);
  if (!stream || strcmp(stream, "foo") != 0) return;
  g_stream = xptiRegisterStream(stream);
  xptiRegisterCallback(g_stream, xpti_tp_graph_create, on_event);
  xptiRegisterCallback(g_stream, xpti_tp_node_create, on_event);
  xptiRegisterCallback(g_stream, xpti_tp_task_begin, on_event);
  xptiRegisterCallback(g_stream, xpti_tp_task_end, on_event);
}

XPTI_CALLBACK_API void xptiTraceFinish(const char *stream) {
  printf("finish stream=%s\n", stream);
  fflush(stdout);
}
