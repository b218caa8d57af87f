/* strobe.h: the strobe user API for C and C++.
 *
 * Mark regions of your program, name threads, add markers, count progress
 * for causal profiling, and pause or resume collection. The calls go to the strobe runtime when the program
 * runs under `strobe sample`; without it every call is a no-op costing a
 * load and a branch (the runtime is looked up once per translation unit,
 * with dlsym; link with -ldl on glibc older than 2.34).
 *
 *     #include <strobe.h>
 *     strobe_push_region("solve");
 *     ...
 *     strobe_pop_region();
 *
 * Regions nest per thread; strobe_pop_region closes the innermost one.
 * Region names are copied: any NUL-terminated string may be passed.
 */
#ifndef STROBE_H
#define STROBE_H

#include <dlfcn.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The runtime's table of entry points (grows only by appending). */
typedef struct strobe_api {
    uint32_t size;
    uint32_t version;
    void (*push_region)(const char *name);
    void (*pop_region)(void);
    void (*mark)(const char *name);
    void (*set_thread_name)(const char *name);
    void (*pause)(void);
    void (*resume)(void);
    /* version 2 */
    void (*progress)(const char *name);
    void (*progress_begin)(const char *name);
    void (*progress_end)(const char *name);
} strobe_api_t;

/* The runtime's table, or NULL when the program runs without strobe. */
static inline const strobe_api_t *strobe_api(void) {
    /* 1 = not looked up yet; NULL = looked up, absent. */
    static const strobe_api_t *table = (const strobe_api_t *)1;
    const strobe_api_t *t = __atomic_load_n(&table, __ATOMIC_RELAXED);
    if (__builtin_expect(t == (const strobe_api_t *)1, 0)) {
        /* RTLD_DEFAULT is ((void *)0) in glibc. */
        t = (const strobe_api_t *)dlsym((void *)0, "strobe_runtime_api");
        __atomic_store_n(&table, t, __ATOMIC_RELAXED);
    }
    return t;
}

/* Opens a region named `name` on the calling thread. */
static inline void strobe_push_region(const char *name) {
    const strobe_api_t *a = strobe_api();
    if (a) a->push_region(name);
}

/* Closes the calling thread's innermost open region. */
static inline void strobe_pop_region(void) {
    const strobe_api_t *a = strobe_api();
    if (a) a->pop_region();
}

/* Records an instant marker named `name`. */
static inline void strobe_mark(const char *name) {
    const strobe_api_t *a = strobe_api();
    if (a) a->mark(name);
}

/* Names the calling thread in the profile (the kernel keeps 15 bytes). */
static inline void strobe_set_thread_name(const char *name) {
    const strobe_api_t *a = strobe_api();
    if (a) a->set_thread_name(name);
}

/* Stops all collection (sampling, regions, markers) until strobe_resume. */
static inline void strobe_pause(void) {
    const strobe_api_t *a = strobe_api();
    if (a) a->pause();
}

/* Resumes collection after strobe_pause. */
static inline void strobe_resume(void) {
    const strobe_api_t *a = strobe_api();
    if (a) a->resume();
}

/* The table has entries up to `field` (an older runtime's is shorter). */
#define STROBE_API_HAS(a, field) \
    ((a)->size >= __builtin_offsetof(strobe_api_t, field) + sizeof((a)->field))

/* Progress points, for causal profiling (`strobe causal`): a throughput
 * point counts units of work done ("one request served"); a latency point
 * marks when a unit of work begins and ends. Names are any NUL-terminated
 * strings (up to 80 bytes are kept). Under strobe a call looks its name
 * up among the points named so far (8-9 ns with one, more with many);
 * without strobe it costs nothing measurable. */
static inline void strobe_progress(const char *name) {
    const strobe_api_t *a = strobe_api();
    if (a && STROBE_API_HAS(a, progress)) a->progress(name);
}

static inline void strobe_progress_begin(const char *name) {
    const strobe_api_t *a = strobe_api();
    if (a && STROBE_API_HAS(a, progress_begin)) a->progress_begin(name);
}

static inline void strobe_progress_end(const char *name) {
    const strobe_api_t *a = strobe_api();
    if (a && STROBE_API_HAS(a, progress_end)) a->progress_end(name);
}

#ifdef __cplusplus
}

namespace strobe {
/* A region for the lifetime of a scope: strobe::region r("solve"); */
class region {
public:
    explicit region(const char *name) { strobe_push_region(name); }
    ~region() { strobe_pop_region(); }
    region(const region &) = delete;
    region &operator=(const region &) = delete;
};
}  // namespace strobe
#endif

#endif /* STROBE_H */
