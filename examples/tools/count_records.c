/*
 * count_records.c — an example strobe tool: counts records per kind and
 * prints the counts at exit.
 *
 * Build:  cc -shared -fPIC -I include examples/tools/count_records.c -o libcount_records.so
 * Use:    STROBE_TOOL_LIB=$PWD/libcount_records.so <program run under strobe>
 * Output: one line per kind with records, "<kind> <count>", then
 *         "dropped <n>" and "callbacks <n>", written to the file named in
 *         COUNT_RECORDS_OUTPUT, or to stdout when it is unset.
 */
#include "strobe_tool.h"

#include <stdio.h>
#include <stdlib.h>

STROBE_TOOL_DEFINE_API_VERSION;

struct counts {
    uint64_t per_kind[STROBE_KIND_LAST];
    uint64_t dropped;
    uint64_t callbacks;
    const strobe_tool_api_t *api;
    strobe_context_id_t context;
    strobe_buffer_id_t buffer;
};

static int on_records(strobe_context_id_t ctx, strobe_buffer_id_t buf,
                      const strobe_record_header_t *headers, size_t n,
                      void *data, uint64_t drop_count) {
    (void)ctx;
    (void)buf;
    struct counts *c = data;
    c->callbacks++;
    c->dropped += drop_count;
    for (size_t i = 0; i < n; i++) {
        if (headers[i].kind < STROBE_KIND_LAST) c->per_kind[headers[i].kind]++;
    }
    return 0;
}

struct configure_state {
    const strobe_tool_api_t *api;
    strobe_context_id_t ctx;
    strobe_buffer_id_t buf;
    strobe_status_t status;
};

static int configure_kind(uint32_t kind, void *data) {
    struct configure_state *s = data;
    s->status = s->api->configure_buffer_tracing_service(s->ctx, kind, NULL, 0, s->buf);
    return s->status != STROBE_STATUS_OK;
}

int strobe_tool_configure(uint32_t api_version, const strobe_tool_api_t *api, void **tool_data) {
    if ((api_version >> 16) != STROBE_TOOL_API_VERSION_MAJOR || api->size < sizeof(*api)) {
        fprintf(stderr, "count_records: incompatible strobe tool API %u.%u\n",
                api_version >> 16, api_version & 0xffff);
        return STROBE_STATUS_INCOMPATIBLE_VERSION;
    }
    struct counts *c = calloc(1, sizeof *c);
    if (!c) return STROBE_STATUS_ERROR;
    c->api = api;
    struct configure_state s = {.api = api};
    strobe_status_t st = api->create_context(&s.ctx);
    if (st == STROBE_STATUS_OK)
        st = api->create_buffer(s.ctx, 64 * 1024, 48 * 1024, STROBE_BUFFER_POLICY_LOSSLESS,
                                on_records, c, &s.buf);
    if (st == STROBE_STATUS_OK) {
        api->iterate_kinds(configure_kind, &s);
        st = s.status;
    }
    if (st == STROBE_STATUS_OK) st = api->start_context(s.ctx);
    if (st != STROBE_STATUS_OK) {
        fprintf(stderr, "count_records: configuration failed: %s\n", api->status_string(st));
        free(c);
        return st;
    }
    c->context = s.ctx;
    c->buffer = s.buf;
    *tool_data = c;
    return 0;
}

void strobe_tool_finalize(void *tool_data) {
    struct counts *c = tool_data;
    if (!c) return;
    /* Stop receiving records before the counts are freed, then flush what
     * is still buffered (strobe already flushed at exit; again is harmless). */
    c->api->stop_context(c->context);
    c->api->flush_buffer(c->buffer);
    const char *path = getenv("COUNT_RECORDS_OUTPUT");
    FILE *out = path ? fopen(path, "w") : stdout;
    if (!out) {
        perror("count_records: cannot open COUNT_RECORDS_OUTPUT");
        out = stdout;
    }
    for (uint32_t k = 1; k < STROBE_KIND_LAST; k++) {
        if (c->per_kind[k])
            fprintf(out, "%s %llu\n", c->api->query_kind_name(k), (unsigned long long)c->per_kind[k]);
    }
    fprintf(out, "dropped %llu\n", (unsigned long long)c->dropped);
    fprintf(out, "callbacks %llu\n", (unsigned long long)c->callbacks);
    if (out != stdout) fclose(out);
    else fflush(stdout);
    free(c);
}
