/* An instrumented program: emits a graph, a node and a task begin/end pair on
 * stream "foo". Built twice by the tests: linked with libstrobe_xpti.so, and
 * with the proxy (xpti_proxy.c) that loads XPTI_FRAMEWORK_DISPATCHER. */
#include <stdio.h>

#include "xpti/xpti_trace_framework.h"

static void work(void) {}

int main(void) {
  int enabled = xptiTraceEnabled();
  printf("enabled=%d\n", enabled);
  fflush(stdout);
  if (!enabled) {
    /* Calls still return cleanly when tracing is off. */
    uint64_t inst = 0;
    xpti_payload_t p = xpti_payload_init("off", "app.c", 1, 1, NULL);
    xpti_trace_event_data_t *e = xptiMakeEvent("off", &p, 0, 0, &inst);
    int rc = xptiNotifySubscribers(1, xpti_tp_task_begin, NULL, e, inst, NULL);
    printf("disabled notify rc=%d\n", rc);
    return 0;
  }
  uint8_t s = xptiRegisterStream("foo");
  xptiInitialize("foo", 1, 0, "foo 1.0");
  xptiInitialize("foo", 1, 0, "foo 1.0"); /* repeat: not forwarded */
  xptiInitialize("bar", 2, 3, "bar 2.3");
  uint64_t gi = 0, ti = 0;
  xpti_payload_t gp = xpti_payload_init("app_graph", NULL, XPTI_INVALID_LINE, XPTI_INVALID_LINE, NULL);
  xpti_trace_event_data_t *graph = xptiMakeEvent("app_graph", &gp, xpti_event_graph, xpti_activity_active, &gi);
  xptiNotifySubscribers(s, xpti_tp_graph_create, NULL, graph, gi, NULL);
  for (int i = 0; i < 2; i++) {
    xpti_payload_t tp = xpti_payload_init("work", "app.c", 42, 3, (const void *)work);
    xpti_trace_event_data_t *task = xptiMakeEvent("work", &tp, xpti_event_algorithm, xpti_activity_active, &ti);
    if (i == 0) {
      xpti_object_id_t o = xptiRegisterObject("q0", 2, xpti_metadata_string);
      xptiAddMetadata(task, "queue", o);
    }
    xptiNotifySubscribers(s, xpti_tp_task_begin, graph, task, ti, "payload-data");
    work();
    xptiNotifySubscribers(s, xpti_tp_task_end, graph, task, ti, NULL);
  }
  xptiFinalize("foo");
  printf("done\n");
  return 0;
}
