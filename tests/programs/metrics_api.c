/* metrics_api: exercises libstrobe_metrics.so through include/strobe_metrics.h
 * the way seed 003's examples use its profiler library: the version rule,
 * info queries, a context counting the calling thread (start, read, stop,
 * get_data, get_metrics), a completion callback (one that closes its context,
 * as in the seed's example 5.3), groups counted in turn and at once,
 * SINGLEGROUP failing with STROBE_PMU_SLOTS=1, and errno/error string after
 * bad calls. Prints what it measured and "METRICS API OK" on success; prints
 * each failed check and exits 1 otherwise; exits 77 naming the reason when
 * this machine cannot open software perf events. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "strobe_metrics.h"

static int failures;

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "CHECK FAILED %s:%d: %s\n", __FILE__, __LINE__,    \
                    #cond);                                                    \
            failures++;                                                        \
        }                                                                      \
    } while (0)

#define CHECK_OK(call)                                                         \
    do {                                                                       \
        strobe_metrics_status_t s_ = (call);                                   \
        if (s_ != STROBE_METRICS_STATUS_SUCCESS) {                             \
            fprintf(stderr, "CHECK FAILED %s:%d: %s returned %d: %s\n",        \
                    __FILE__, __LINE__, #call, (int)s_,                        \
                    strobe_metrics_error_string());                            \
            failures++;                                                        \
        }                                                                      \
    } while (0)

static uint64_t thread_cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static volatile uint64_t sink;

/* Burns `ms` milliseconds of this thread's CPU time. */
static void burn(unsigned ms) {
    uint64_t end = thread_cpu_ns() + (uint64_t)ms * 1000000u;
    uint64_t x = 1;
    while (thread_cpu_ns() < end) {
        for (int i = 0; i < 1000; i++) x = x * 6364136223846793005u + 1;
    }
    sink = x;
}

/* Maps `n` fresh pages (no huge pages) and writes one byte in each: at
 * least `n` page faults. */
static void touch_pages(size_t n) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    char *p = mmap(NULL, n * page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    madvise(p, n * page, MADV_NOHUGEPAGE);
    for (size_t i = 0; i < n; i++) p[i * page] = (char)i;
    munmap(p, n * page);
}

/* ---- info callbacks ---------------------------------------------------- */

struct seen {
    unsigned count;
    int ipc, faults_rates, task_clock, stop_after;
};

static strobe_metrics_status_t on_metric(const strobe_metrics_info_data_t info,
                                         void *data) {
    struct seen *s = data;
    if (info.kind != STROBE_METRICS_INFO_KIND_METRIC) return STROBE_METRICS_STATUS_ERROR;
    s->count++;
    if (strcmp(info.metric.name, "IPC") == 0) {
        s->ipc = info.metric.expr && strcmp(info.metric.expr, "instructions / cycles") == 0 &&
                 info.metric.event == NULL;
        printf("metric %s = %s [%s]\n", info.metric.name, info.metric.expr,
               info.metric.unit ? info.metric.unit : "");
    }
    if (strstr(info.metric.name, "-faults/s")) s->faults_rates++;
    if (s->stop_after && s->count == (unsigned)s->stop_after)
        return STROBE_METRICS_STATUS_ERROR;
    return STROBE_METRICS_STATUS_SUCCESS;
}

static strobe_metrics_status_t on_counter(const strobe_metrics_info_data_t info,
                                          void *data) {
    struct seen *s = data;
    if (info.kind != STROBE_METRICS_INFO_KIND_COUNTER) return STROBE_METRICS_STATUS_ERROR;
    s->count++;
    if (strcmp(info.counter.name, "task-clock") == 0) {
        s->task_clock = info.counter.available == 1 && info.counter.unavailable_reason == NULL &&
                        strcmp(info.counter.source, "software") == 0;
        printf("counter %s (%s, %s) available=%u\n", info.counter.name,
               info.counter.source, info.counter.unit, info.counter.available);
    }
    return STROBE_METRICS_STATUS_SUCCESS;
}

/* ---- completion callbacks ----------------------------------------------- */

struct done {
    int calls;
    uint32_t last_index;
    uint32_t last_count;
    int int64_values;
};

static void on_complete(strobe_metrics_group_t *group, void *arg) {
    struct done *d = arg;
    d->calls++;
    d->last_index = group->index;
    d->last_count = group->feature_count;
    for (uint32_t i = 0; i < group->feature_count; i++)
        if (group->features[i]->data.kind == STROBE_METRICS_DATA_KIND_INT64) d->int64_values++;
}

/* The seed's example 5.3: dump, then close the context. */
static void on_complete_close(strobe_metrics_group_t *group, void *arg) {
    int *closed = arg;
    *closed = strobe_metrics_close(group->context) == STROBE_METRICS_STATUS_SUCCESS;
}

static strobe_metrics_feature_t feature(const char *name) {
    strobe_metrics_feature_t f;
    memset(&f, 0, sizeof f);
    f.kind = STROBE_METRICS_FEATURE_KIND_METRIC;
    f.name = name;
    return f;
}

static void check_version(void) {
    printf("library %u.%u, header %u.%u\n", strobe_metrics_version_major(),
           strobe_metrics_version_minor(), STROBE_METRICS_VERSION_MAJOR,
           STROBE_METRICS_VERSION_MINOR);
    CHECK(STROBE_METRICS_VERSION_COMPATIBLE());
    CHECK_OK(STROBE_METRICS_CHECK_VERSION());
    CHECK(strobe_metrics_check_version(STROBE_METRICS_VERSION_MAJOR + 1, 0) ==
          STROBE_METRICS_STATUS_SUCCESS);
    CHECK(strobe_metrics_check_version(0, 9) ==
          STROBE_METRICS_STATUS_ERROR_INCOMPATIBLE_VERSION);
    CHECK(strobe_metrics_errno() == STROBE_METRICS_STATUS_ERROR_INCOMPATIBLE_VERSION);
    CHECK(strstr(strobe_metrics_error_string(), "strobe_metrics_check_version") != NULL);
}

static void check_info(void) {
    uint32_t n = 0;
    CHECK_OK(strobe_metrics_get_info(STROBE_METRICS_INFO_KIND_METRIC_COUNT, &n));
    struct seen s = {0};
    CHECK_OK(strobe_metrics_iterate_info(STROBE_METRICS_INFO_KIND_METRIC, on_metric, &s));
    CHECK(n >= 12 && s.count == n);
    CHECK(s.ipc);
    CHECK(s.faults_rates == 2);

    uint32_t counters = 0;
    CHECK_OK(strobe_metrics_get_info(STROBE_METRICS_INFO_KIND_COUNTER_COUNT, &counters));
    struct seen c = {0};
    CHECK_OK(strobe_metrics_iterate_info(STROBE_METRICS_INFO_KIND_COUNTER, on_counter, &c));
    CHECK(counters > 10 && c.count == counters);
    CHECK(c.task_clock);

    uint32_t traces = 99;
    CHECK_OK(strobe_metrics_get_info(STROBE_METRICS_INFO_KIND_TRACE_COUNT, &traces));
    CHECK(traces == 0);

    /* Queries: NULL fields are wildcards, '*' globs. */
    strobe_metrics_info_data_t q;
    memset(&q, 0, sizeof q);
    q.metric.name = "*-faults/s";
    struct seen qs = {0};
    CHECK_OK(strobe_metrics_query_info(STROBE_METRICS_INFO_KIND_METRIC, q, on_metric, &qs));
    CHECK(qs.count == 2 && qs.faults_rates == 2);
    memset(&q, 0, sizeof q);
    q.counter.name = "task-clock";
    struct seen qc = {0};
    CHECK_OK(strobe_metrics_query_info(STROBE_METRICS_INFO_KIND_COUNTER, q, on_counter, &qc));
    CHECK(qc.count == 1 && qc.task_clock);

    /* A callback's error stops the iteration and is returned. */
    struct seen st = {0};
    st.stop_after = 3;
    CHECK(strobe_metrics_iterate_info(STROBE_METRICS_INFO_KIND_METRIC, on_metric, &st) ==
          STROBE_METRICS_STATUS_ERROR);
    CHECK(st.count == 3);
    CHECK(strobe_metrics_errno() == STROBE_METRICS_STATUS_ERROR);
    CHECK(strstr(strobe_metrics_error_string(), "iteration stopped") != NULL);

    /* get_info takes count kinds only. */
    CHECK(strobe_metrics_get_info(STROBE_METRICS_INFO_KIND_METRIC, &n) ==
          STROBE_METRICS_STATUS_ERROR_INVALID_ARGUMENT);
}

static void check_bad_calls(void) {
    strobe_metrics_feature_t f[2] = {feature("task-clock"), feature("no-such-feature")};
    strobe_metrics_t *ctx = NULL;
    CHECK(strobe_metrics_open(f, 2, &ctx, 0, NULL) == STROBE_METRICS_STATUS_ERROR_UNKNOWN_FEATURE);
    CHECK(strobe_metrics_errno() == STROBE_METRICS_STATUS_ERROR_UNKNOWN_FEATURE);
    CHECK(strstr(strobe_metrics_error_string(), "`no-such-feature`") != NULL);
    printf("unknown feature: %s\n", strobe_metrics_error_string());
    CHECK(ctx == NULL);

    CHECK(strobe_metrics_start(NULL, 0) == STROBE_METRICS_STATUS_ERROR_INVALID_ARGUMENT);
    CHECK(strobe_metrics_close((strobe_metrics_t *)&f) ==
          STROBE_METRICS_STATUS_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(strobe_metrics_error_string(), "not an open context") != NULL);
    strobe_metrics_properties_t p;
    memset(&p, 0, sizeof p);
    p.queue = &p;
    CHECK(strobe_metrics_open(f, 1, &ctx, 0, &p) == STROBE_METRICS_STATUS_ERROR_NOT_SUPPORTED);
}

/* One group counting the calling thread. Returns 0 when perf events cannot
 * be opened here. */
static int check_counting(void) {
    strobe_metrics_feature_t f[3] = {feature("task-clock"), feature("page-faults"),
                                     feature("cpu-utilisation")};
    struct done d = {0};
    strobe_metrics_properties_t p;
    memset(&p, 0, sizeof p);
    p.callback = on_complete;
    p.callback_arg = &d;
    strobe_metrics_t *ctx = NULL;
    strobe_metrics_status_t s = strobe_metrics_open(f, 3, &ctx, 0, &p);
    if (s == STROBE_METRICS_STATUS_ERROR_UNAVAILABLE) {
        printf("SKIP: %s\n", strobe_metrics_error_string());
        return 0;
    }
    CHECK_OK(s);
    if (s) return 1;
    uint32_t groups = 0;
    CHECK_OK(strobe_metrics_group_count(ctx, &groups));
    CHECK(groups == 1);
    strobe_metrics_group_t g;
    CHECK_OK(strobe_metrics_get_group(ctx, 0, &g));
    CHECK(g.index == 0 && g.feature_count == 3 && g.context == ctx);
    CHECK(g.features[0] == &f[0] && g.features[2] == &f[2]);
    CHECK(f[0].data.kind == STROBE_METRICS_DATA_KIND_UNINIT);

    const size_t pages = 512;
    CHECK_OK(strobe_metrics_start(ctx, 0));
    uint64_t t0 = thread_cpu_ns();
    burn(200);
    touch_pages(pages);
    uint64_t t1 = thread_cpu_ns();
    CHECK_OK(strobe_metrics_read(ctx, 0));
    CHECK(f[0].data.kind == STROBE_METRICS_DATA_KIND_INT64 && f[0].data.result_int64 > 0);
    CHECK(d.calls == 0);
    CHECK_OK(strobe_metrics_stop(ctx, 0));
    CHECK_OK(strobe_metrics_get_data(ctx, 0));
    CHECK(d.calls == 1 && d.last_index == 0 && d.last_count == 3 && d.int64_values == 2);
    CHECK(f[2].data.kind == STROBE_METRICS_DATA_KIND_UNINIT);
    CHECK_OK(strobe_metrics_get_metrics(ctx));

    double tc = (double)f[0].data.result_int64, cpu = (double)(t1 - t0);
    uint64_t faults = f[1].data.result_int64;
    double util = f[2].data.result_double;
    printf("task-clock %.0f ns (thread CPU time %.0f ns), page-faults %llu (%zu pages), "
           "cpu-utilisation %.3f\n",
           tc, cpu, (unsigned long long)faults, pages, util);
    CHECK(f[0].data.kind == STROBE_METRICS_DATA_KIND_INT64);
    CHECK(fabs(tc - cpu) <= 0.1 * cpu);
    CHECK(f[1].data.kind == STROBE_METRICS_DATA_KIND_INT64 && faults >= pages);
    CHECK(f[2].data.kind == STROBE_METRICS_DATA_KIND_DOUBLE && util > 0.05 && util <= 1.1);

    /* A new start counts from zero. */
    CHECK_OK(strobe_metrics_start(ctx, 0));
    burn(10);
    CHECK_OK(strobe_metrics_get_data(ctx, 0));
    CHECK(f[0].data.result_int64 >= 5000000 && (double)f[0].data.result_int64 < tc / 2);
    CHECK(d.calls == 2);

    /* A group index the context lacks. */
    CHECK(strobe_metrics_start(ctx, 5) == STROBE_METRICS_STATUS_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(strobe_metrics_error_string(), "group 5 does not exist") != NULL);

    CHECK_OK(strobe_metrics_close(ctx));
    CHECK(strobe_metrics_close(ctx) == STROBE_METRICS_STATUS_ERROR_INVALID_ARGUMENT);
    return 1;
}

static void check_groups(void) {
    setenv("STROBE_PMU_SLOTS", "1", 1);
    strobe_metrics_feature_t f[2] = {feature("task-clock"), feature("page-faults")};
    strobe_metrics_t *ctx = NULL;
    CHECK(strobe_metrics_open(f, 2, &ctx, STROBE_METRICS_MODE_SINGLEGROUP, NULL) ==
          STROBE_METRICS_STATUS_ERROR_GROUPS);
    CHECK(strobe_metrics_errno() == STROBE_METRICS_STATUS_ERROR_GROUPS);
    CHECK(strstr(strobe_metrics_error_string(), "need 2 groups") != NULL);
    printf("singlegroup: %s\n", strobe_metrics_error_string());

    struct done d = {0};
    strobe_metrics_properties_t p;
    memset(&p, 0, sizeof p);
    p.callback = on_complete;
    p.callback_arg = &d;
    CHECK_OK(strobe_metrics_open(f, 2, &ctx, STROBE_METRICS_MODE_STANDALONE, &p));
    unsetenv("STROBE_PMU_SLOTS");
    if (!ctx) return;
    uint32_t groups = 0;
    CHECK_OK(strobe_metrics_group_count(ctx, &groups));
    CHECK(groups == 2);

    /* All at once. */
    CHECK_OK(strobe_metrics_start(ctx, STROBE_METRICS_ALL_GROUPS));
    uint64_t t0 = thread_cpu_ns();
    burn(100);
    touch_pages(64);
    uint64_t t1 = thread_cpu_ns();
    CHECK_OK(strobe_metrics_get_data(ctx, STROBE_METRICS_ALL_GROUPS));
    CHECK(d.calls == 2 && d.last_index == 1 && d.last_count == 1);
    double tc = (double)f[0].data.result_int64, cpu = (double)(t1 - t0);
    CHECK(f[0].data.kind == STROBE_METRICS_DATA_KIND_INT64 && fabs(tc - cpu) <= 0.1 * cpu);
    CHECK(f[1].data.kind == STROBE_METRICS_DATA_KIND_INT64 && f[1].data.result_int64 >= 64);

    /* In turn, through the group functions. */
    strobe_metrics_group_t g;
    CHECK_OK(strobe_metrics_get_group(ctx, 1, &g));
    CHECK(g.feature_count == 1 && g.features[0] == &f[1]);
    CHECK_OK(strobe_metrics_group_start(&g));
    touch_pages(32);
    CHECK_OK(strobe_metrics_group_read(&g));
    CHECK(f[1].data.result_int64 >= 32 && f[1].data.result_int64 < 64);
    CHECK_OK(strobe_metrics_group_stop(&g));
    CHECK_OK(strobe_metrics_group_get_data(&g));
    CHECK(d.calls == 3);
    CHECK(f[0].data.result_int64 == (uint64_t)tc); /* group 0 untouched */
    CHECK_OK(strobe_metrics_close(ctx));
    CHECK(strobe_metrics_group_start(&g) == STROBE_METRICS_STATUS_ERROR_INVALID_ARGUMENT);
}

static void check_callback_closes(void) {
    strobe_metrics_feature_t f[1] = {feature("task-clock")};
    int closed = 0;
    strobe_metrics_properties_t p;
    memset(&p, 0, sizeof p);
    p.callback = on_complete_close;
    p.callback_arg = &closed;
    strobe_metrics_t *ctx = NULL;
    CHECK_OK(strobe_metrics_open(f, 1, &ctx, STROBE_METRICS_MODE_SINGLEGROUP, &p));
    if (!ctx) return;
    CHECK_OK(strobe_metrics_start(ctx, 0));
    burn(5);
    CHECK_OK(strobe_metrics_get_data(ctx, 0));
    CHECK(closed == 1);
    CHECK(f[0].data.kind == STROBE_METRICS_DATA_KIND_INT64);
    CHECK(strobe_metrics_start(ctx, 0) == STROBE_METRICS_STATUS_ERROR_INVALID_ARGUMENT);
}

int main(void) {
    check_version();
    check_info();
    check_bad_calls();
    if (!check_counting()) return 77;
    check_groups();
    check_callback_closes();
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("METRICS API OK\n");
    return 0;
}
