/*
 * strobe_metrics.h — CPU counters and derived metrics through the API shape
 * of the ROC profiler library (seed 003), for libstrobe_metrics.so.
 *
 * The seed's names map one to one: rocprofiler_X becomes strobe_metrics_X,
 * hsa_status_t becomes strobe_metrics_status_t, and there is no GPU agent
 * argument (the counters belong to a thread or a process of this machine).
 * Link with -lstrobe_metrics; the library's soname is libstrobe_metrics.so.
 *
 * Usage model (seed 4.1):
 *
 *   strobe_metrics_feature_t f[2] = {0};
 *   f[0].kind = STROBE_METRICS_FEATURE_KIND_METRIC; f[0].name = "task-clock";
 *   f[1].kind = STROBE_METRICS_FEATURE_KIND_METRIC; f[1].name = "cpu-utilisation";
 *   strobe_metrics_t *ctx;
 *   if (strobe_metrics_open(f, 2, &ctx, STROBE_METRICS_MODE_SINGLEGROUP, NULL))
 *       fprintf(stderr, "%s\n", strobe_metrics_error_string());
 *   strobe_metrics_start(ctx, 0);
 *   work();
 *   strobe_metrics_get_data(ctx, 0);      // stop, final read, completion callback
 *   strobe_metrics_get_metrics(ctx);      // derived metrics
 *   printf("%llu ns, %.2f CPUs\n", (unsigned long long)f[0].data.result_int64,
 *          f[1].data.result_double);
 *   strobe_metrics_close(ctx);
 *
 * Feature names are those of `strobe stat -e` and `strobe avail`: derived
 * metrics (built-in, or from the file named by STROBE_METRICS, TOML or the
 * seed's XML), counters defined in that file, and catalog events
 * (`task-clock`, `cycles`, `L1-dcache-load-misses`, `cpu/event=0x3c/`,
 * `sched:sched_switch`, `rusage/user-time/`, `proc/rss/`, `duration_time`).
 * docs/metrics.md describes them.
 *
 * Every function may be called from any thread. Every failing call returns a
 * non-zero status and records it with a message naming what was wrong for
 * strobe_metrics_errno()/strobe_metrics_error_string() on the calling thread.
 * No call ever lets an internal failure crash the program: it becomes
 * STROBE_METRICS_STATUS_ERROR_INTERNAL.
 *
 * Layouts are those of 64-bit Linux (LP64); the offsets in comments are
 * checked by the library's tests against this header. The header needs C11
 * or C++11 (anonymous unions, as in the seed).
 */
#ifndef STROBE_METRICS_H
#define STROBE_METRICS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================
 * 3. General API
 * ====================================================================== */

/* API version of this header. Compatibility rule (seed 3.3): a library
 * serves programs built with this header when the library's major version
 * is less than or equal to STROBE_METRICS_VERSION_MAJOR. Minor versions
 * only add functions, enum values and fields carved from reserved space. */
#define STROBE_METRICS_VERSION_MAJOR 1
#define STROBE_METRICS_VERSION_MINOR 0

/* Status of every call (the seed's hsa_status_t). */
typedef enum {
    STROBE_METRICS_STATUS_SUCCESS = 0,
    /* Unspecified failure. */
    STROBE_METRICS_STATUS_ERROR = 1,
    /* A NULL pointer, a value out of range, a group index the context does
     * not have, non-zero reserved fields, a pointer that is not an open
     * context. */
    STROBE_METRICS_STATUS_ERROR_INVALID_ARGUMENT = 2,
    /* A feature name nothing defines and the counter catalog cannot read. */
    STROBE_METRICS_STATUS_ERROR_UNKNOWN_FEATURE = 3,
    /* A counter that exists but cannot be counted here (no hardware PMU,
     * perf_event_paranoid, no such thread...). */
    STROBE_METRICS_STATUS_ERROR_UNAVAILABLE = 4,
    /* STROBE_METRICS_MODE_SINGLEGROUP and the features need more groups;
     * the message says how many. */
    STROBE_METRICS_STATUS_ERROR_GROUPS = 5,
    /* Enabling, disabling, resetting or reading counters failed. */
    STROBE_METRICS_STATUS_ERROR_IO = 6,
    /* The built-in definitions or the STROBE_METRICS file cannot be read,
     * or a metric cannot be planned (cycle, too complex). */
    STROBE_METRICS_STATUS_ERROR_DEFINITIONS = 7,
    /* Something CPUs do not have: trace features, feature parameters, an
     * HSA queue. */
    STROBE_METRICS_STATUS_ERROR_NOT_SUPPORTED = 8,
    /* The library's major version is above the header's (see the
     * compatibility rule above). */
    STROBE_METRICS_STATUS_ERROR_INCOMPATIBLE_VERSION = 9,
    /* A bug in the library, caught before it reached the program; the
     * message says where. */
    STROBE_METRICS_STATUS_ERROR_INTERNAL = 10
} strobe_metrics_status_t;

/* The status of the last failed call on this thread (SUCCESS if none has
 * failed yet). Successful calls do not change it. */
strobe_metrics_status_t strobe_metrics_errno(void);

/* The message of the last failed call on this thread, naming the function
 * and what was wrong ("" if none has failed yet). Valid until the next
 * failing call on this thread; never NULL. */
const char *strobe_metrics_error_string(void);

/* The library's version (the seed names them rocprofiler_version_major and
 * rocprofiler_version_minor). */
uint32_t strobe_metrics_version_major(void);
uint32_t strobe_metrics_version_minor(void);

/* SUCCESS when this library serves a program built with a header of
 * version header_major.header_minor, i.e. when the library's major version
 * is <= header_major; STROBE_METRICS_STATUS_ERROR_INCOMPATIBLE_VERSION (and
 * errno/error string set) otherwise. */
strobe_metrics_status_t strobe_metrics_check_version(uint32_t header_major,
                                                     uint32_t header_minor);

/* Checks the loaded library against this header. */
#define STROBE_METRICS_CHECK_VERSION()                                      \
    strobe_metrics_check_version(STROBE_METRICS_VERSION_MAJOR,              \
                                 STROBE_METRICS_VERSION_MINOR)

/* Non-zero when the loaded library is compatible with this header (the
 * same rule, without touching errno). */
#define STROBE_METRICS_VERSION_COMPATIBLE()                                 \
    (strobe_metrics_version_major() <= STROBE_METRICS_VERSION_MAJOR)

/* ======================================================================
 * 4.2 Info API
 * ====================================================================== */

typedef enum {
    /* Definitions of metrics: the derived metrics and the counters
     * ("basic metrics") of the built-in set merged with the file named by
     * STROBE_METRICS, in definition order. */
    STROBE_METRICS_INFO_KIND_METRIC = 0,
    STROBE_METRICS_INFO_KIND_METRIC_COUNT = 1,
    /* Traces: CPUs have none (count 0, nothing iterated). */
    STROBE_METRICS_INFO_KIND_TRACE = 2,
    STROBE_METRICS_INFO_KIND_TRACE_COUNT = 3,
    /* The counter catalog of this machine (`strobe avail --counters`):
     * every counter, available or not, with the availability probed for
     * the calling process. Tracepoints are one entry, `sys:name`. */
    STROBE_METRICS_INFO_KIND_COUNTER = 4,
    STROBE_METRICS_INFO_KIND_COUNTER_COUNT = 5
} strobe_metrics_info_kind_t;

/* One info entry. Strings are owned by the library and stay valid until it
 * is unloaded; NULL where an entry has no such field. Definitions are read
 * once, at the first call that needs them (later changes to STROBE_METRICS
 * are not seen); the catalog is probed once, at the first COUNTER query.
 * Size 56, the union at offset 8. */
typedef struct {
    strobe_metrics_info_kind_t kind; /* METRIC, TRACE or COUNTER */
    union {
        struct {
            const char *name;        /* 8:  metric name */
            const char *description; /* 16: what it measures, or NULL */
            const char *expr;        /* 24: expression of a derived metric;
                                      *     NULL for a basic metric */
            const char *unit;        /* 32: unit, or NULL */
            const char *event;       /* 40: the catalog event a basic metric
                                      *     counts (`cpu/event=0x3c/`);
                                      *     NULL for a derived metric */
        } metric;
        struct {
            const char *name;         /* 8 */
            const char *description;  /* 16 */
            uint32_t parameter_count; /* 24 */
        } trace;
        struct {
            const char *name;               /* 8:  catalog name */
            const char *description;        /* 16: what it counts */
            const char *unit;               /* 24: "ns", "KiB"... or "" */
            const char *source;             /* 32: "hardware", "hardware-cache",
                                             *     "software", "raw",
                                             *     "tracepoint", "rusage",
                                             *     "proc" or "tool" */
            const char *unavailable_reason; /* 40: why it cannot be counted
                                             *     here; NULL when available */
            uint32_t available;             /* 48: 1 when it can be counted */
        } counter;
    };
} strobe_metrics_info_data_t;

/* Called for each entry; any status but SUCCESS stops the iteration, and
 * the iterating call returns that status (and records it in errno). */
typedef strobe_metrics_status_t (*strobe_metrics_info_callback_t)(
    const strobe_metrics_info_data_t info, void *data);

/* Returns the count for a *_COUNT kind into *(uint32_t *)data. Other kinds
 * are INVALID_ARGUMENT (iterate them instead). */
strobe_metrics_status_t strobe_metrics_get_info(strobe_metrics_info_kind_t kind,
                                                void *data);

/* Calls callback for every entry of kind METRIC, TRACE or COUNTER. */
strobe_metrics_status_t strobe_metrics_iterate_info(
    strobe_metrics_info_kind_t kind, strobe_metrics_info_callback_t callback,
    void *data);

/* Like iterate_info, for the entries that match query: each string field of
 * the query's member for `kind` (query.metric or query.counter; query.kind
 * is ignored) is NULL for any value or a pattern the entry's field must
 * match entirely, where `*` matches any run of characters (an entry's NULL
 * field matches as ""). Integer fields of the query are ignored. */
strobe_metrics_status_t strobe_metrics_query_info(
    strobe_metrics_info_kind_t kind, strobe_metrics_info_data_t query,
    strobe_metrics_info_callback_t callback, void *data);

/* ======================================================================
 * 4.3 Context API
 * ====================================================================== */

/* A profiling context (opaque). */
typedef struct strobe_metrics_context strobe_metrics_t;

typedef enum {
    STROBE_METRICS_FEATURE_KIND_METRIC = 0, /* a metric or counter */
    STROBE_METRICS_FEATURE_KIND_TRACE = 1   /* not supported on CPUs */
} strobe_metrics_feature_kind_t;

/* A trace parameter (the seed's hsa_ven_amd_aqlprofile_parameter_t). CPU
 * metrics take none. Size 8. */
typedef struct {
    uint32_t parameter_name; /* 0 */
    uint32_t value;          /* 4 */
} strobe_metrics_feature_parameter_t;

typedef enum {
    STROBE_METRICS_DATA_KIND_UNINIT = 0, /* no value (see below) */
    STROBE_METRICS_DATA_KIND_INT32 = 1,
    STROBE_METRICS_DATA_KIND_INT64 = 2,  /* counters */
    STROBE_METRICS_DATA_KIND_FLOAT = 3,
    STROBE_METRICS_DATA_KIND_DOUBLE = 4, /* derived metrics; counters with a
                                          * scale (see below) */
    STROBE_METRICS_DATA_KIND_BYTES = 5   /* traces (never on CPUs) */
} strobe_metrics_data_kind_t;

/* A feature's value. Size 24, the union at offset 8.
 *
 * Counters fill INT64 with the count over the group's last start..read
 * interval. When the group shared the PMU with other groups (the kernel
 * multiplexed it), the count is scaled to the whole interval:
 * raw x enabled / running, rounded. A counter whose catalog entry carries a
 * scale (a PMU's `.scale` file, e.g. energy in joules) fills DOUBLE with the
 * value in its unit instead.
 *
 * Derived metrics fill DOUBLE at strobe_metrics_get_metrics().
 *
 * UNINIT means no value: the group was never started or read, the counter
 * never got onto the PMU during the interval, or a derived metric's inputs
 * are missing, it divides by zero or its result is not finite. */
typedef struct {
    strobe_metrics_data_kind_t kind; /* 0 */
    union {
        uint32_t result_int32;
        uint64_t result_int64;
        float result_float;
        double result_double;
        struct {
            void *ptr;
            uint32_t size;
            uint32_t instances;
        } result_bytes;
    }; /* 8 */
} strobe_metrics_data_t;

/* A profiling feature: what to count and where its value goes. The array
 * given to strobe_metrics_open must stay valid until strobe_metrics_close;
 * the library writes each feature's `data` and nothing else. (In the seed
 * the member is `rocprofiler_data_t* data`; as in rocprofiler's own header
 * it is held by value here, so there is nothing to allocate.) Size 56. */
typedef struct {
    strobe_metrics_feature_kind_t kind;            /* 0:  METRIC */
    const char *name;                              /* 8:  feature name */
    const strobe_metrics_feature_parameter_t *parameters; /* 16: NULL */
    uint32_t parameter_count;                      /* 24: must be 0 */
    strobe_metrics_data_t data;                    /* 32: [out] value */
} strobe_metrics_feature_t;

/* Mode mask of strobe_metrics_open. */
typedef enum {
    /* Accepted for the seed's shape; every CPU context is standalone. */
    STROBE_METRICS_MODE_STANDALONE = 1,
    /* Accepted, meaningless on CPUs (there is no queue to create). */
    STROBE_METRICS_MODE_CREATEQUEUE = 2,
    /* Fail with STROBE_METRICS_STATUS_ERROR_GROUPS, naming how many groups
     * are needed, unless every counter fits one group. In this mode
     * software events (task-clock, page-faults...) ride along with the
     * hardware events in one perf group, as `perf stat` schedules them. */
    STROBE_METRICS_MODE_SINGLEGROUP = 4
} strobe_metrics_mode_t;

/* Whom the counters observe. */
typedef enum {
    /* One thread: properties.pid is its kernel thread id, 0 = the thread
     * calling strobe_metrics_open (the default, as PAPI counts). Threads it
     * creates are not counted. */
    STROBE_METRICS_TARGET_THREAD = 0,
    /* A process: properties.pid, 0 = the calling process. Without
     * STROBE_METRICS_FLAG_INHERIT only its task (its main thread) is
     * counted; with it, also every thread and child process that task, or
     * a thread it created, creates after the open. Threads that already
     * existed are not counted, nor what they create (inheritance follows
     * the creating task): open before the program starts its threads.
     * Rusage fields of the calling process cover all its threads. */
    STROBE_METRICS_TARGET_PROCESS = 1
} strobe_metrics_target_t;

/* properties.flags */
#define STROBE_METRICS_FLAG_INHERIT 1u

/* A profiling group: the features counted together in one pass. Filled by
 * strobe_metrics_get_group; `features` points into the context and is
 * valid until strobe_metrics_close. Size 32. */
typedef struct strobe_metrics_group {
    uint32_t index;                      /* 0:  group index */
    strobe_metrics_feature_t **features; /* 8:  the group's features */
    uint32_t feature_count;              /* 16 */
    strobe_metrics_t *context;           /* 24: the context */
} strobe_metrics_group_t;

/* Completion callback: called by get_data (and at the end of an
 * intercepted region) after the group's final read, on the calling thread.
 * It may call any function of this library, strobe_metrics_close of
 * group->context included (the seed's example 5.3); the group then must not
 * be used after the close. */
typedef void (*strobe_metrics_context_callback_t)(strobe_metrics_group_t *group,
                                                  void *arg);

/* Properties of strobe_metrics_open; NULL or all-zero gives the defaults
 * (no callback, the calling thread, each PMU's own group size). Size 80. */
typedef struct {
    strobe_metrics_context_callback_t callback; /* 0:  completion callback */
    void *callback_arg;                         /* 8:  its argument */
    void *queue;              /* 16: the seed's HSA queue: must be NULL */
    uint32_t queue_depth;     /* 24: ignored */
    strobe_metrics_target_t target; /* 28: THREAD (0) or PROCESS (1) */
    int32_t pid;              /* 32: thread or process id, 0 = the caller */
    uint32_t flags;           /* 36: STROBE_METRICS_FLAG_INHERIT */
    uint32_t max_slots;       /* 40: at most this many perf events per
                               *     group; 0 = each PMU's own number
                               *     (STROBE_PMU_SLOTS overrides it) */
    uint32_t reserved0;       /* 44: must be 0 */
    uint64_t reserved[4];     /* 48: must be 0 */
} strobe_metrics_properties_t;

/* Opens a context counting `features` (an [in/out] array that must stay
 * valid until close) on the target of `properties`. Each feature's data is
 * set to UNINIT. The counters are opened disabled, in groups the PMU can
 * schedule together: perf events grouped per PMU, at most max_slots per
 * group (software events in groups of their own), counters that are not
 * perf events (rusage, procfs, duration_time) in group 0. A derived metric
 * belongs to the group of its last input. Errors: UNKNOWN_FEATURE naming
 * the feature (and the counter it needs), UNAVAILABLE saying why the
 * counter cannot be counted, GROUPS in SINGLEGROUP mode,
 * NOT_SUPPORTED for traces, parameters or a queue, DEFINITIONS when the
 * STROBE_METRICS file is bad. */
strobe_metrics_status_t strobe_metrics_open(
    strobe_metrics_feature_t *features, uint32_t feature_count,
    strobe_metrics_t **context, uint32_t mode,
    const strobe_metrics_properties_t *properties);

/* Closes the context: its counters are closed, and the handle, its groups'
 * feature arrays and everything else it holds are released (a call running
 * on another thread finishes first). The features array is the caller's. */
strobe_metrics_status_t strobe_metrics_close(strobe_metrics_t *context);

/* The number of groups, into *count. */
strobe_metrics_status_t strobe_metrics_group_count(strobe_metrics_t *context,
                                                   uint32_t *count);

/* Group `index` into *group. */
strobe_metrics_status_t strobe_metrics_get_group(strobe_metrics_t *context,
                                                 uint32_t index,
                                                 strobe_metrics_group_t *group);

/* Computes every derived metric of the context from its groups' latest
 * reads and stores it into the feature's data (DOUBLE or UNINIT). Groups
 * counted in turn each contribute the values of their own last interval. */
strobe_metrics_status_t strobe_metrics_get_metrics(strobe_metrics_t *context);

/* ======================================================================
 * 4.4 Sampling API
 * ====================================================================== */

/* Group index meaning "every group of the context at once": started
 * together, hardware groups that do not fit the PMU together are
 * multiplexed by the kernel and their counts scaled (see
 * strobe_metrics_data_t). Alternatively start, stop and read each group in
 * turn, over runs of the same work (the seed's multi-pass model). */
#define STROBE_METRICS_ALL_GROUPS UINT32_MAX

/* Starts group `group_index`: its counts are reset to zero, then enabled.
 * Starting a running group does nothing. */
strobe_metrics_status_t strobe_metrics_start(strobe_metrics_t *context,
                                             uint32_t group_index);

/* Stops the group; its counts are kept. Stopping a stopped group does
 * nothing. */
strobe_metrics_status_t strobe_metrics_stop(strobe_metrics_t *context,
                                            uint32_t group_index);

/* Reads the group's counts since its start into its counter features'
 * data (running or stopped). */
strobe_metrics_status_t strobe_metrics_read(strobe_metrics_t *context,
                                            uint32_t group_index);

/* Waits for the group's data: stops it if it is running, reads it, then
 * calls the completion callback (if any) for it. */
strobe_metrics_status_t strobe_metrics_get_data(strobe_metrics_t *context,
                                                uint32_t group_index);

/* The same four for a group filled by strobe_metrics_get_group. */
strobe_metrics_status_t strobe_metrics_group_start(strobe_metrics_group_t *group);
strobe_metrics_status_t strobe_metrics_group_stop(strobe_metrics_group_t *group);
strobe_metrics_status_t strobe_metrics_group_read(strobe_metrics_group_t *group);
strobe_metrics_status_t strobe_metrics_group_get_data(strobe_metrics_group_t *group);

/* ======================================================================
 * 4.5 Intercepting API: per-region counters (the CPU counterpart of the
 * seed's per-dispatch callbacks)
 * ====================================================================== */

typedef enum {
    STROBE_METRICS_REGION_KIND_USER = 0,      /* strobe_push_region/pop_region */
    STROBE_METRICS_REGION_KIND_XPTI_TASK = 1  /* an XPTI task begin/end */
} strobe_metrics_region_kind_t;

/* What the tool is told about a region. Size 40. */
typedef struct {
    uint64_t thread_id;        /* 0:  kernel thread id of the region */
    const char *region_name;   /* 8:  its name (valid during the call) */
    strobe_metrics_region_kind_t region_kind; /* 16 */
    uint32_t depth;            /* 20: nesting depth on its thread, 0 = outermost */
    uint64_t begin_ns;         /* 24: CLOCK_MONOTONIC ns at its begin */
    uint64_t end_ns;           /* 32: at its end; 0 in region_begin */
} strobe_metrics_callback_data_t;

/* Called as a region begins, on the region's thread. The tool sets *group to
 * the group to count over the region (filled by strobe_metrics_get_group,
 * typically of a context it opens here on the calling thread; the library
 * copies the struct, the context must stay open until the region ends), or
 * leaves it NULL to count nothing. The group is started after the callback
 * returns. A status other than SUCCESS counts nothing for this region. */
typedef strobe_metrics_status_t (*strobe_metrics_callback_t)(
    const strobe_metrics_callback_data_t *callback_data, void *user_data,
    strobe_metrics_group_t **group);

/* Called as the region ends, after its group (if any) was stopped and read
 * into the features' data and the context's completion callback ran;
 * `group` is the region's group, or NULL. Called for every region whose
 * region_begin was called, also when that failed or gave no group (unless
 * the callbacks were removed or replaced since). If the completion
 * callback closed the context, `group` must not be used. */
typedef strobe_metrics_status_t (*strobe_metrics_region_end_callback_t)(
    const strobe_metrics_callback_data_t *callback_data, void *user_data,
    strobe_metrics_group_t *group);

/* Size 16. */
typedef struct {
    strobe_metrics_callback_t region_begin;           /* 0: required */
    strobe_metrics_region_end_callback_t region_end;  /* 8: optional */
} strobe_metrics_intercepting_t;

/* Registers the callbacks (replacing any registered before) with `data`
 * passed to them as user_data. Regions that began before stay ignored. A
 * region whose group is already running (the same group returned for a
 * nested region) counts nothing; give nested regions their own contexts.
 * With a tool registered, each region costs its callbacks and, with a
 * group, a reset, a read and an enable at its begin and a disable and a
 * read at its end (a few system calls), on the region's thread; without
 * one, the runtime's calls cost an atomic load. */
strobe_metrics_status_t strobe_metrics_set_intercepting(
    strobe_metrics_intercepting_t callbacks, void *data);

/* Unregisters them. Regions already begun still have their groups stopped
 * and read (and completion callbacks called) as they end; region_end is not
 * called for them. */
strobe_metrics_status_t strobe_metrics_remove_intercepting(void);

/* ---- internal: called by the strobe runtime, not by tools -------------
 * The runtime calls these around every region when
 * strobe_metrics_intercepting_active() says a tool is registered. Fields
 * left 0 are filled: thread_id with the calling thread, begin_ns/end_ns
 * with the time of the call. An end is matched with the latest begin of
 * the same thread with the same depth; begins of deeper regions still open
 * are ended with it. region_name may be NULL at the end (the begin's name
 * is used). Both return the status of the tool's callback or of
 * starting/reading the group (and record it in errno). */
uint32_t strobe_metrics_intercepting_active(void);
strobe_metrics_status_t strobe_metrics_intercept_region_begin(
    const strobe_metrics_callback_data_t *data);
strobe_metrics_status_t strobe_metrics_intercept_region_end(
    const strobe_metrics_callback_data_t *data);

#ifdef __cplusplus
}
#endif

#endif /* STROBE_METRICS_H */
