// Exercises the XPTI 2026.2 additions of libstrobe_xpti.so through strobe's
// header, the way a runtime built against the 2026.2 headers uses them:
// tracepoints and their C++ interfaces (virtual calls), metadata maps,
// scopes, lookups, defaults and detail levels. Prints "TRACEPOINTS OK" on
// success; on failure prints each failing check and exits 1.
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "xpti/xpti_trace_framework.h"

static int failures;
#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::printf("FAILED line %d: %s\n", __LINE__, #cond);                    \
      failures++;                                                              \
    }                                                                          \
  } while (0)

using metadata_map = std::unordered_map<xpti_string_id_t, xpti_object_id_t>;

static int g_task_begins;
static uint64_t g_last_uid;
static void on_task(uint16_t, xpti::trace_event_data_t *, xpti::trace_event_data_t *event,
                    uint64_t, const void *) {
  g_task_begins++;
  g_last_uid = event ? event->unique_id : 0;
}

int main() {
  xptiForceSetTraceEnabled(true);

  // A new tracepoint and its interfaces.
  int here = 0;
  xpti_tracepoint_t *tp = xptiCreateTracepoint("submit", "queue.cpp", 42, 7, &here);
  CHECK(tp != nullptr);
  xpti_payload_if_t *p = tp->payload();
  CHECK(std::strcmp(p->name(), "submit") == 0);
  CHECK(std::strcmp(p->source_file(), "queue.cpp") == 0);
  CHECK(p->line_no() == 42 && p->column_no() == 7);
  CHECK(p->is_valid());
  CHECK(std::strcmp(xptiLookupString(p->name_string_id()), "submit") == 0);
  CHECK(std::strcmp(xptiLookupString(p->file_string_id()), "queue.cpp") == 0);
  CHECK(tp->instance() == 1);
  xpti::trace_event_data_t *ev = tp->event_ref();
  xpti::payload_t *pr = tp->payload_ref();
  CHECK(ev && pr && ev->reserved.payload == pr);
  CHECK(std::strcmp(pr->name, "submit") == 0 && pr->code_ptr_va == &here);
  CHECK(ev->unique_id == tp->uid64() && pr->internal == tp->uid64() && p->uid64() == tp->uid64());
  CHECK(ev->instance_id == 1);
  CHECK(ev->event_type == (uint16_t)xpti::trace_event_type_t::algorithm);
  xpti_trace_event_t *ei = tp->event();
  CHECK(ei->uid64() == tp->uid64() && ei->instance() == 1 && ei->event_ref() == ev);
  ei->set_event_type((uint16_t)xpti::trace_event_type_t::graph);
  CHECK(ev->event_type == (uint16_t)xpti::trace_event_type_t::graph);
  CHECK(xptiQueryPayload(ev) == pr);
  CHECK(xptiFindEvent(tp->uid64()) == ev);
  CHECK(xptiQueryPayloadByUID(tp->uid64()) == pr);

  // The same location again: a new instance with its own event and id.
  xpti_tracepoint_t *tp2 = xptiCreateTracepoint("submit", "queue.cpp", 42, 7, nullptr);
  CHECK(tp2 && tp2 != tp && tp2->instance() == 2 && tp2->uid64() != tp->uid64());
  CHECK(tp2->payload()->name_string_id() == p->name_string_id());
  // The name is compared, not the pointer: a reused buffer is a new location.
  char buf[16];
  std::strcpy(buf, "first");
  xpti_tracepoint_t *a = xptiCreateTracepoint(buf, nullptr, 0, 0, nullptr);
  std::strcpy(buf, "second");
  xpti_tracepoint_t *b = xptiCreateTracepoint(buf, nullptr, 0, 0, nullptr);
  CHECK(std::strcmp(a->payload()->name(), "first") == 0);
  CHECK(std::strcmp(b->payload()->name(), "second") == 0 && b->instance() == 1);
  // No name, file or address: "<unknown>".
  xpti_tracepoint_t *u = xptiCreateTracepoint(nullptr, nullptr, 0, 0, nullptr);
  CHECK(u && std::strcmp(u->payload()->name(), "<unknown>") == 0);

  // Metadata: through the interface, the C function and the map.
  xpti_object_id_t kernel = xptiRegisterObject("vadd", 4, 0);
  CHECK(tp->metadata()->add_item("kernel_name", kernel) == xpti::result_t::XPTI_RESULT_SUCCESS);
  CHECK(tp->metadata()->add_item("kernel_name", kernel) ==
        xpti::result_t::XPTI_RESULT_DUPLICATE);
  CHECK(xptiAddMetadata(ev, "queue_id", kernel) == XPTI_RC_SUCCESS);
  CHECK(tp->metadata()->count() == 2);
  auto *map = static_cast<metadata_map *>(xptiQueryMetadata(ev));
  CHECK(map && map->size() == 2);
  char *stored = nullptr;
  CHECK(map->at(xptiRegisterString("kernel_name", &stored)) == kernel);
  int seen = 0;
  char *key = nullptr;
  xpti_object_id_t value = -1;
  for (auto rc = tp->metadata()->first_item(&key, value); rc == xpti::result_t::XPTI_RESULT_SUCCESS;
       rc = tp->metadata()->next_item(&key, value)) {
    CHECK(value == kernel);
    CHECK(std::strcmp(key, "kernel_name") == 0 || std::strcmp(key, "queue_id") == 0);
    seen++;
  }
  CHECK(seen == 2);

  // An xptiMakeEvent event: metadata on both sides, interface views by id.
  xpti::payload_t mp("made", "made.cpp", 3, 4, nullptr);
  uint64_t inst = 0;
  xpti::trace_event_data_t *made =
      xptiMakeEvent("made", &mp, (uint16_t)xpti::trace_event_type_t::algorithm,
                    xpti::trace_activity_type_t::active, &inst);
  CHECK(made && inst == 1);
  CHECK(xptiAddMetadata(made, "sym", kernel) == XPTI_RC_SUCCESS);
  CHECK(xptiStrobeMetadataCount(made) == 1);
  auto *made_map = static_cast<metadata_map *>(xptiQueryMetadata(made));
  CHECK(made_map && made_map->size() == 1);
  const xpti_trace_event_t *view = xptiLookupEvent(made->unique_id);
  CHECK(view && const_cast<xpti_trace_event_t *>(view)->event_ref() == made);
  CHECK(const_cast<xpti_trace_event_t *>(view)->metadata()->count() == 1);
  const xpti_payload_if_t *pv = xptiLookupPayload(made->unique_id);
  CHECK(pv && std::strcmp(pv->name(), "made") == 0 && pv->line_no() == 3);
  CHECK(xptiLookupEvent(tp->uid64()) == tp->event());
  CHECK(xptiLookupPayload(tp->uid64()) == tp->payload());
  CHECK(xptiLookupEvent(12345) == nullptr && xptiLookupPayload(12345) == nullptr);

  // Notifications carry the tracepoint's own event.
  uint8_t s = xptiRegisterStream("tp.stream");
  CHECK(xptiRegisterCallback(s, (uint16_t)xpti::trace_point_type_t::task_begin, on_task) ==
        XPTI_RC_SUCCESS);
  CHECK(xptiNotifySubscribers(s, (uint16_t)xpti::trace_point_type_t::task_begin, nullptr, ev,
                              tp->instance(), nullptr) == XPTI_RC_SUCCESS);
  CHECK(g_task_begins == 1 && g_last_uid == tp->uid64());

  // Scopes: per thread, and the universal id follows.
  CHECK(xptiGetTracepointScopeData() == nullptr);
  CHECK(xptiSetTracepointScopeData(nullptr) == XPTI_RC_INVALIDARG);
  CHECK(xptiSetTracepointScopeData(tp) == XPTI_RC_SUCCESS);
  CHECK(xptiGetTracepointScopeData() == tp && xptiGetUniversalId() == tp->uid64());
  std::thread([] { CHECK(xptiGetTracepointScopeData() == nullptr); }).join();
  xptiUnsetTracepointScopeData();
  CHECK(xptiGetTracepointScopeData() == nullptr && xptiGetUniversalId() == 0);
  const xpti_tracepoint_t *scoped = xptiRegisterTracepointScope("scope", "s.cpp", 1, 1, nullptr);
  CHECK(scoped && std::strcmp(const_cast<xpti_tracepoint_t *>(scoped)->payload()->name(),
                              "scope") == 0);
  CHECK(xptiDeleteTracepoint(const_cast<xpti_tracepoint_t *>(scoped)) == XPTI_RC_SUCCESS);

  // Deleting: the id is dead afterwards, a second delete is refused.
  uint64_t dead = tp2->uid64();
  CHECK(xptiDeleteTracepoint(tp2) == XPTI_RC_SUCCESS);
  CHECK(xptiFindEvent(dead) == nullptr && xptiLookupEvent(dead) == nullptr);
  CHECK(xptiDeleteTracepoint(tp2) == XPTI_RC_INVALIDARG);
  CHECK(xptiDeleteTracepoint(nullptr) == XPTI_RC_INVALIDARG);
  // Recycled slots get new instances; many threads create and delete at once.
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; t++)
    threads.emplace_back([] {
      for (int i = 0; i < 20000; i++) {
        xpti_tracepoint_t *x = xptiCreateTracepoint("hot", "hot.cpp", 1, 1, nullptr);
        if (!x || std::strcmp(x->payload()->name(), "hot") != 0 ||
            xptiDeleteTracepoint(x) != XPTI_RC_SUCCESS)
          failures++;
      }
    });
  for (auto &t : threads)
    t.join();
  xpti_tracepoint_t *last = xptiCreateTracepoint("hot", "hot.cpp", 1, 1, nullptr);
  CHECK(last && last->instance() == 80001);

  // Defaults, self-notification, detail levels.
  CHECK(xptiGetDefaultStreamID() == 0);
  CHECK(xptiSetDefaultStreamID(s) == XPTI_RC_SUCCESS && xptiGetDefaultStreamID() == s);
  CHECK(xptiSetDefaultStreamID(200) == XPTI_RC_INVALIDARG && xptiGetDefaultStreamID() == s);
  CHECK(xptiGetDefaultEventType() == (uint16_t)xpti::trace_event_type_t::algorithm);
  CHECK(xptiSetDefaultEventType(0) == XPTI_RC_INVALIDARG);
  CHECK(xptiSetDefaultEventType(3) == XPTI_RC_SUCCESS && xptiGetDefaultEventType() == 3);
  CHECK(xptiGetDefaultTraceType() == (uint16_t)xpti::trace_point_type_t::function_begin);
  CHECK(xptiSetDefaultTraceType(0) == XPTI_RC_INVALIDARG);
  CHECK(xptiSetDefaultTraceType(8) == XPTI_RC_SUCCESS && xptiGetDefaultTraceType() == 8);
  CHECK(!xptiCheckTracepointScopeNotification());
  xptiEnableTracepointScopeNotification(true);
  CHECK(xptiCheckTracepointScopeNotification());
  CHECK(xptiGetEffectiveStreamDetailLevel(s) == 2);
  CHECK(xptiGetEffectiveStreamDetailLevel(0) == 2);

  if (failures) {
    std::printf("%d failures\n", failures);
    return 1;
  }
  std::printf("TRACEPOINTS OK\n");
  return 0;
}
