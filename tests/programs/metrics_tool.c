/* metrics_tool: a tool library in the style of seed 003's tool plugins. Its
 * constructor registers region callbacks with strobe_metrics_set_intercepting;
 * region_begin opens a SINGLEGROUP context counting {task-clock, page-faults}
 * on the region's thread and hands back its group (a region named
 * "uncounted" gets none); region_end records the group's values and closes
 * the context. metrics_tool_report() returns one line per region:
 *   region NAME depth D tid T task-clock N page-faults P kinds K K completions C span S
 * (kinds are the features' data kinds, span is end_ns - begin_ns), or
 *   region NAME uncounted
 * and "error ..." lines for anything unexpected. It is also a strobe tool
 * plugin (strobe_tool.h): loaded by STROBE_TOOL_LIB into a program under
 * `strobe sample`, it counts the program's own regions through the API the
 * runtime exports, and strobe_tool_finalize writes the report to the file
 * named by METRICS_TOOL_REPORT. Built by crates/strobe-metrics-c/tests/c_abi.rs
 * (linked with -lstrobe_metrics, driven by the test) and by
 * crates/strobe-cli/tests/counters_in_profiles.rs (linked with nothing). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strobe_metrics.h"
#include "strobe_tool.h"

STROBE_TOOL_DEFINE_API_VERSION;

#define MAX_REGIONS 64

struct region {
    char name[64];
    strobe_metrics_feature_t features[2];
    strobe_metrics_t *ctx;
    strobe_metrics_group_t group;
    int completions;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct region regions[MAX_REGIONS];
static int nregions;
static char report[16384];
static size_t report_len;
static strobe_metrics_status_t registered = STROBE_METRICS_STATUS_ERROR;

static void append(const char *line) {
    size_t n = strlen(line);
    if (report_len + n + 1 < sizeof report) {
        memcpy(report + report_len, line, n);
        report_len += n;
        report[report_len++] = '\n';
        report[report_len] = 0;
    }
}

static void on_complete(strobe_metrics_group_t *group, void *arg) {
    struct region *r = arg;
    if (group->context == r->ctx) r->completions++;
}

static strobe_metrics_status_t on_begin(const strobe_metrics_callback_data_t *d, void *user,
                                        strobe_metrics_group_t **group) {
    if (user != (void *)regions) return STROBE_METRICS_STATUS_ERROR;
    if (d->end_ns != 0 || d->begin_ns == 0) return STROBE_METRICS_STATUS_ERROR;
    if (strcmp(d->region_name, "uncounted") == 0) return STROBE_METRICS_STATUS_SUCCESS;
    pthread_mutex_lock(&lock);
    struct region *r = nregions < MAX_REGIONS ? &regions[nregions++] : NULL;
    pthread_mutex_unlock(&lock);
    if (!r) return STROBE_METRICS_STATUS_ERROR;
    snprintf(r->name, sizeof r->name, "%s", d->region_name);
    memset(r->features, 0, sizeof r->features);
    r->features[0].kind = STROBE_METRICS_FEATURE_KIND_METRIC;
    r->features[0].name = "task-clock";
    r->features[1].kind = STROBE_METRICS_FEATURE_KIND_METRIC;
    r->features[1].name = "page-faults";
    strobe_metrics_properties_t p;
    memset(&p, 0, sizeof p);
    p.callback = on_complete;
    p.callback_arg = r;
    strobe_metrics_status_t s =
        strobe_metrics_open(r->features, 2, &r->ctx, STROBE_METRICS_MODE_SINGLEGROUP, &p);
    if (s != STROBE_METRICS_STATUS_SUCCESS) return s;
    s = strobe_metrics_get_group(r->ctx, 0, &r->group);
    if (s != STROBE_METRICS_STATUS_SUCCESS) return s;
    *group = &r->group;
    return STROBE_METRICS_STATUS_SUCCESS;
}

static strobe_metrics_status_t on_end(const strobe_metrics_callback_data_t *d, void *user,
                                      strobe_metrics_group_t *group) {
    char line[512];
    (void)user;
    if (!group) {
        snprintf(line, sizeof line, "region %s uncounted", d->region_name);
        pthread_mutex_lock(&lock);
        append(line);
        pthread_mutex_unlock(&lock);
        return STROBE_METRICS_STATUS_SUCCESS;
    }
    struct region *r = NULL;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nregions; i++)
        if (regions[i].ctx == group->context) r = &regions[i];
    pthread_mutex_unlock(&lock);
    if (!r || group->feature_count != 2) {
        snprintf(line, sizeof line, "error region %s: unknown group", d->region_name);
    } else {
        const strobe_metrics_data_t *tc = &group->features[0]->data;
        const strobe_metrics_data_t *pf = &group->features[1]->data;
        snprintf(line, sizeof line,
                 "region %s depth %u tid %llu task-clock %llu page-faults %llu kinds %d %d "
                 "completions %d span %llu",
                 d->region_name, d->depth, (unsigned long long)d->thread_id,
                 (unsigned long long)tc->result_int64, (unsigned long long)pf->result_int64,
                 (int)tc->kind, (int)pf->kind, r->completions,
                 (unsigned long long)(d->end_ns - d->begin_ns));
        if (strcmp(d->region_name, r->name) != 0)
            snprintf(line, sizeof line, "error region %s ended as %s", r->name, d->region_name);
        strobe_metrics_close(r->ctx);
    }
    pthread_mutex_lock(&lock);
    append(line);
    pthread_mutex_unlock(&lock);
    return STROBE_METRICS_STATUS_SUCCESS;
}

__attribute__((constructor)) static void metrics_tool_init(void) {
    strobe_metrics_intercepting_t callbacks = {on_begin, on_end};
    if (STROBE_METRICS_CHECK_VERSION() == STROBE_METRICS_STATUS_SUCCESS)
        registered = strobe_metrics_set_intercepting(callbacks, regions);
}

__attribute__((visibility("default"))) int metrics_tool_registered(void) {
    return (int)registered;
}

__attribute__((visibility("default"))) const char *metrics_tool_report(void) {
    return report;
}

/* As a strobe tool plugin: stay loaded (the constructor registered). */
int strobe_tool_configure(uint32_t api_version, const strobe_tool_api_t *api, void **tool_data) {
    (void)api_version;
    (void)api;
    *tool_data = NULL;
    return registered == STROBE_METRICS_STATUS_SUCCESS ? 0 : 1;
}

void strobe_tool_finalize(void *tool_data) {
    (void)tool_data;
    const char *path = getenv("METRICS_TOOL_REPORT");
    if (!path) return;
    FILE *f = fopen(path, "w");
    if (!f) return;
    pthread_mutex_lock(&lock);
    fputs(report, f);
    pthread_mutex_unlock(&lock);
    fclose(f);
}
