/* Library half of hotspots.c: the two hot functions and the driver that
 * splits CPU time between them. Built with -O2 -fomit-frame-pointer. */
#include <stdint.h>
#include <time.h>

static uint64_t cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) double hot_a(long iters) {
    double x = 1.0;
    for (long i = 0; i < iters; i++) x = x * 1.0000001 + 0.5 / (x + (double)i);
    return x;
}

__attribute__((noinline)) double hot_b(long iters) {
    double x = 2.0;
    for (long i = 0; i < iters; i++) x = x * 0.9999999 + 0.25 / (x + (double)i);
    return x;
}

volatile double hotlib_sink;

/* Spends `seconds` of CPU time, `share_a` of it in hot_a, the rest in hot_b;
 * chunk lengths are pseudo-random. Writes the CPU ns spent in each. */
__attribute__((noinline)) void split_work(double seconds, double share_a, uint64_t seed,
                                          uint64_t *ns_a, uint64_t *ns_b) {
    uint64_t ta = 0, tb = 0, total = (uint64_t)(seconds * 1e9);
    uint64_t rng = seed | 1;
    while (ta + tb < total) {
        int pick_a = (double)ta < share_a * (double)(ta + tb + 1);
        rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
        long iters = 5000 + (long)(rng % 40000);
        uint64_t t0 = cpu_ns();
        hotlib_sink += pick_a ? hot_a(iters) : hot_b(iters);
        uint64_t t1 = cpu_ns();
        if (pick_a) ta += t1 - t0; else tb += t1 - t0;
    }
    *ns_a = ta;
    *ns_b = tb;
}
