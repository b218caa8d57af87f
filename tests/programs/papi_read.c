/* papi_read READS EVENT...: the cost of one PAPI_read of an event set of
 * the named native events (e.g. perf::TASK-CLOCK), counting the calling
 * thread; prints "ns_per_read=N" (for strobe-bench metrics, beside
 * strobe-metrics' own read). Exits 2 with PAPI's message when an event
 * cannot be added. */
#include <papi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    long reads = argc > 1 ? atol(argv[1]) : 100000;
    if (PAPI_library_init(PAPI_VER_CURRENT) != PAPI_VER_CURRENT) {
        fprintf(stderr, "PAPI_library_init failed\n");
        return 2;
    }
    int set = PAPI_NULL;
    if (PAPI_create_eventset(&set) != PAPI_OK) return 2;
    for (int i = 2; i < argc; i++) {
        int r = PAPI_add_named_event(set, argv[i]);
        if (r != PAPI_OK) {
            fprintf(stderr, "%s: %s\n", argv[i], PAPI_strerror(r));
            return 2;
        }
    }
    long long values[16];
    if (PAPI_start(set) != PAPI_OK) return 2;
    for (long i = 0; i < reads / 10; i++) PAPI_read(set, values); /* warm up */
    double t0 = now();
    for (long i = 0; i < reads; i++) PAPI_read(set, values);
    double t1 = now();
    PAPI_stop(set, values);
    printf("ns_per_read=%.1f\n", (t1 - t0) * 1e9 / reads);
    return 0;
}
