/* xpti_count_subscriber.c - an XPTI subscriber that counts every notification.
 *
 * For every stream the dispatcher announces through xptiTraceInit it registers
 * (once per stream name: a repeated xptiTraceInit must not double the counts)
 * one callback for each of the 65536 trace types and counts, per (stream,
 * trace type), the notifications and those whose event carries a payload with
 * a non-null name. The callbacks only do relaxed atomic increments (no locks,
 * no allocation); the payload is read from the event's reserved.payload field,
 * as Intel's collectors read it, and since a callback is not told its stream,
 * each of up to 32 streams gets its own callback function. At process exit
 * (a destructor; xptiTraceFinish is not needed) the counts go to the file named by XPTI_COUNT_OUT (stderr when
 * unset), sorted by stream name then trace type:
 *
 *   # dispatcher<TAB>PATH          library the xpti* calls resolved to
 *   # init<TAB>STREAM<TAB>N        xptiTraceInit calls for STREAM
 *   # finish<TAB>STREAM<TAB>N      xptiTraceFinish calls for STREAM
 *   # register-failed<TAB>STREAM<TAB>N  trace types xptiRegisterCallback refused
 *   STREAM<TAB>TYPE<TAB>COUNT<TAB>NAMED
 *
 * TYPE is decimal; NAMED counts the notifications whose event's payload has a
 * non-null name. Used by scripts/sycl-check.sh to compare dispatchers.
 *
 * The xpti functions are declared here (no vendor header). The library is
 * linked like Intel's collectors, against a library with the SONAME
 * libxptifw.so.1, so at run time the NEEDED entry is satisfied by whichever
 * dispatcher with that SONAME is already loaded:
 *
 *   cc -shared -fPIC -O2 -Wall -Wextra -o libxpti_count_subscriber.so \
 *      tests/programs/xpti_count_subscriber.c -L<dir> -lxptifw -ldl
 *
 * where <dir>/libxptifw.so is (a link to) a libxptifw.so.1.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the parts of the XPTI C ABI this file uses ------------------------- */

/* Leading fields of xpti::payload_t. */
struct count_payload {
  const char *name;
};

/* Leading fields of xpti::trace_event_data_t, up to reserved.payload. */
struct count_event {
  uint64_t unique_id;
  uint64_t data_id;
  uint64_t instance_id;
  uint16_t event_type;
  uint16_t activity_type;
  uint32_t unused;
  uint64_t source_id;
  uint64_t target_id;
  struct count_payload *payload; /* reserved.payload */
};

typedef void (*count_callback_t)(uint16_t trace_type, struct count_event *parent,
                                 struct count_event *event, uint64_t instance,
                                 const void *user_data);

/* xpti::result_t is an int-sized enum; 0 is success, negative is failure. */
extern uint8_t xptiRegisterStream(const char *stream_name);
extern int xptiRegisterCallback(uint8_t stream_id, uint16_t trace_type,
                                count_callback_t cb);

/* ---- counting ----------------------------------------------------------- */

#define MAX_STREAMS 32
#define NTYPES 65536

struct stream_slot {
  char name[256];
  unsigned inits;
  unsigned finishes;
  unsigned register_failed;
  int registered;
  _Atomic uint64_t count[NTYPES];
  _Atomic uint64_t named[NTYPES];
};

/* Zero-initialised, so untouched pages cost nothing. */
static struct stream_slot slots[MAX_STREAMS];
static int nslots;
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t owner_pid;
static atomic_int written;

static inline void count_one(int slot, uint16_t trace_type,
                             const struct count_event *event) {
  struct stream_slot *s = &slots[slot];
  atomic_fetch_add_explicit(&s->count[trace_type], 1, memory_order_relaxed);
  if (event && event->payload && event->payload->name)
    atomic_fetch_add_explicit(&s->named[trace_type], 1, memory_order_relaxed);
}

/* The callback has no stream argument, so each slot gets its own function. */
#define SLOT_CB(n)                                                             \
  static void slot_cb_##n(uint16_t trace_type, struct count_event *parent,    \
                          struct count_event *event, uint64_t instance,       \
                          const void *user_data) {                            \
    (void)parent;                                                              \
    (void)instance;                                                            \
    (void)user_data;                                                           \
    count_one(n, trace_type, event);                                           \
  }
#define FOR_EACH_SLOT(X)                                                       \
  X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13)    \
  X(14) X(15) X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23) X(24) X(25)     \
  X(26) X(27) X(28) X(29) X(30) X(31)
FOR_EACH_SLOT(SLOT_CB)

#define SLOT_REF(n) slot_cb_##n,
static const count_callback_t slot_callbacks[MAX_STREAMS] = {
    FOR_EACH_SLOT(SLOT_REF)};

/* Slot of a stream by name, created when asked; -1 when full. Lock held. */
static int slot_of(const char *name, int create) {
  for (int i = 0; i < nslots; i++)
    if (strcmp(slots[i].name, name) == 0)
      return i;
  if (!create || nslots == MAX_STREAMS)
    return -1;
  snprintf(slots[nslots].name, sizeof slots[nslots].name, "%s", name);
  return nslots++;
}

void xptiTraceInit(unsigned major, unsigned minor, const char *version,
                   const char *stream_name) {
  (void)major;
  (void)minor;
  (void)version;
  if (!stream_name)
    return;
  pthread_mutex_lock(&slots_lock);
  if (!owner_pid)
    owner_pid = getpid();
  int slot = slot_of(stream_name, 1);
  if (slot < 0) {
    fprintf(stderr, "xpti_count_subscriber: more than %d streams, '%s' not counted\n",
            MAX_STREAMS, stream_name);
  } else {
    struct stream_slot *s = &slots[slot];
    s->inits++;
    if (!s->registered) {
      s->registered = 1;
      uint8_t id = xptiRegisterStream(stream_name);
      for (uint32_t t = 0; t < NTYPES; t++)
        if (xptiRegisterCallback(id, (uint16_t)t, slot_callbacks[slot]) < 0)
          s->register_failed++;
    }
  }
  pthread_mutex_unlock(&slots_lock);
}

void xptiTraceFinish(const char *stream_name) {
  if (!stream_name)
    return;
  pthread_mutex_lock(&slots_lock);
  int slot = slot_of(stream_name, 0);
  if (slot >= 0)
    slots[slot].finishes++;
  pthread_mutex_unlock(&slots_lock);
}

/* ---- report ------------------------------------------------------------- */

static int by_name(const void *a, const void *b) {
  return strcmp(slots[*(const int *)a].name, slots[*(const int *)b].name);
}

static void write_counts(void) {
  /* Only the process that was traced, and only once. */
  if (owner_pid != getpid() || atomic_exchange(&written, 1))
    return;
  const char *path = getenv("XPTI_COUNT_OUT");
  FILE *f = path && *path ? fopen(path, "w") : stderr;
  if (!f) {
    perror(path);
    return;
  }
  Dl_info info;
  const char *dispatcher = "?";
  if (dladdr((void *)xptiRegisterCallback, &info) && info.dli_fname)
    dispatcher = info.dli_fname;
  fprintf(f, "# dispatcher\t%s\n", dispatcher);

  pthread_mutex_lock(&slots_lock);
  int order[MAX_STREAMS];
  for (int i = 0; i < nslots; i++)
    order[i] = i;
  qsort(order, (size_t)nslots, sizeof order[0], by_name);
  for (int k = 0; k < nslots; k++) {
    const struct stream_slot *s = &slots[order[k]];
    fprintf(f, "# init\t%s\t%u\n", s->name, s->inits);
    fprintf(f, "# finish\t%s\t%u\n", s->name, s->finishes);
    fprintf(f, "# register-failed\t%s\t%u\n", s->name, s->register_failed);
  }
  for (int k = 0; k < nslots; k++) {
    struct stream_slot *s = &slots[order[k]];
    for (uint32_t t = 0; t < NTYPES; t++) {
      uint64_t c = atomic_load_explicit(&s->count[t], memory_order_relaxed);
      if (c)
        fprintf(f, "%s\t%u\t%llu\t%llu\n", s->name, t, (unsigned long long)c,
                (unsigned long long)atomic_load_explicit(&s->named[t],
                                                         memory_order_relaxed));
    }
  }
  pthread_mutex_unlock(&slots_lock);
  if (f != stderr)
    fclose(f);
}

__attribute__((destructor)) static void count_subscriber_fini(void) {
  write_counts();
}
