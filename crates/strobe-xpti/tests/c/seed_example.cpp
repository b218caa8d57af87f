// The seed's C++ usage compiled against our header: payload_t constructors
// (with a function as code address), enum-class overloads, scoped_notify and
// a cached event. Prints what it sent.
#include <cstdio>
#include "xpti/xpti_trace_framework.h"

static int g_begin, g_end;
static void cb(uint16_t type, xpti::trace_event_data_t *, xpti::trace_event_data_t *ev,
               uint64_t instance, const void *) {
  if (type == (uint16_t)xpti::trace_point_type_t::region_begin) g_begin++;
  if (type == (uint16_t)xpti::trace_point_type_t::region_end) g_end++;
  std::printf("cb type=%u uid=%llu instance=%llu\n", type,
              (unsigned long long)ev->unique_id, (unsigned long long)instance);
}

void function2() {}

void function1() {
  uint64_t instance_id = 0;
  static xpti::trace_event_data_t *f1_event = nullptr;
  if (xptiTraceEnabled() && !f1_event) {
    xpti::payload_t p("function1", "main.cpp", 104, 2, function1);
    f1_event = xptiMakeEvent("function1", &p, xpti::trace_event_type_t::algorithm,
                             xpti::trace_activity_type_t::active, &instance_id);
  }
  xpti::framework::scoped_notify ev("myStream", xpti::trace_point_type_t::region_begin,
                                    nullptr, f1_event, instance_id);
  for (int i = 0; i < 5; ++i) function2();
}

int main() {
  xptiForceSetTraceEnabled(true);
  uint8_t stream_id = xptiRegisterStream("myStream");
  xptiInitialize("myStream", 1, 0, "myStream 1.0");
  xptiRegisterCallback(stream_id, xpti::trace_point_type_t::region_begin, cb);
  xptiRegisterCallback(stream_id, xpti::trace_point_type_t::region_end, cb);
  for (int i = 0; i < 3; ++i) function1();
  uint64_t instance_no = 0;
  xpti::payload_t p("application_graph");
  auto event = xptiMakeEvent("app", &p, xpti::trace_event_type_t::graph,
                             xpti::trace_activity_type_t::active, &instance_no);
  auto rc = xptiNotifySubscribers(stream_id, xpti::trace_point_type_t::graph_create,
                                  nullptr, event, instance_no, nullptr);
  std::printf("graph rc=%d begin=%d end=%d\n", (int)rc, g_begin, g_end);
  static_assert(sizeof(xpti::payload_t) == 80, "payload_t size");
  static_assert(sizeof(xpti::trace_event_data_t) == 128, "trace_event_data_t size");
  return (g_begin == 3 && g_end == 3) ? 0 : 1;
}
