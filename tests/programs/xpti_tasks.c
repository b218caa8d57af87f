/* An XPTI-instrumented program, built with the proxy
 * (crates/strobe-xpti/proxy/xpti_proxy.c) as SYCL runtimes are: on stream
 * "strobe.test" it runs task "kernel_a" 3 times and task "kernel_b" twice,
 * then reports a call "urFakeCall" twice the way Unified Runtime reports its
 * calls (function_with_args begin/end, no event, a function_with_args_t as
 * user data). Prints "tracing on" or "tracing off" (no dispatcher). */
#include <stdint.h>
#include <stdio.h>

#include "xpti/xpti_trace_framework.h"

/* XPTI's function_with_args_t (xpti_data_types.h upstream). */
typedef struct {
  uint32_t function_id;
  const char *function_name;
  void *args_data;
  void *ret_data;
  void *user_data;
} function_with_args_t;

static volatile uint64_t sink;

static void spin(void) {
  for (int i = 0; i < 200000; i++) sink += (uint64_t)i;
}

static void task(uint8_t stream, const char *name, uint32_t line) {
  uint64_t instance = 0;
  xpti_payload_t p = xpti_payload_init(name, "xpti_tasks.c", line, 1, NULL);
  xpti_trace_event_data_t *e =
      xptiMakeEvent(name, &p, xpti_event_algorithm, xpti_activity_active, &instance);
  xptiNotifySubscribers(stream, xpti_tp_task_begin, NULL, e, instance, NULL);
  spin();
  xptiNotifySubscribers(stream, xpti_tp_task_end, NULL, e, instance, NULL);
}

int main(void) {
  int on = xptiTraceEnabled();
  printf("tracing %s\n", on ? "on" : "off");
  if (!on) return 0;
  uint8_t s = xptiRegisterStream("strobe.test");
  xptiInitialize("strobe.test", 1, 0, "1.0");
  for (int i = 0; i < 3; i++) task(s, "kernel_a", 10);
  for (int i = 0; i < 2; i++) task(s, "kernel_b", 20);
  function_with_args_t call = {7, "urFakeCall", NULL, NULL, NULL};
  for (int i = 0; i < 2; i++) {
    uint64_t id = xptiGetUniqueId();
    xptiNotifySubscribers(s, xpti_tp_function_with_args_begin, NULL, NULL, id, &call);
    spin();
    xptiNotifySubscribers(s, xpti_tp_function_with_args_end, NULL, NULL, id, &call);
  }
  xptiFinalize("strobe.test");
  return 0;
}
