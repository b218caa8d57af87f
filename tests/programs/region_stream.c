/* region_stream: N regions per thread through the user API, in a pattern
 * a test can check row by row: calls of mid(), each bracketed by
 * strobe_push_region/strobe_pop_region as are the two leaf calls inside it
 * (by end, hence by row id: leaf_a, leaf_b, mid, leaf_a, …; leaves inside
 * their mid), then, for the last N mod 3, single leaf_a regions.
 *
 *   region_stream N [THREADS] [PAUSE_US] [SLOW_EVERY]
 *
 * THREADS threads (default 1) each make N regions. With PAUSE_US, each
 * thread sleeps that long after every 1000 calls of mid() and prints
 * "<thread> <regions done> <CLOCK_MONOTONIC ns>" to stdout (flushed), so
 * a test knows when which regions had ended. With SLOW_EVERY, every
 * SLOW_EVERY-th call of leaf_b on each thread lasts 50 µs (a busy wait),
 * the others well under 1 µs: a time filter between the two keeps exactly
 * those calls and their mid. With REGION_STREAM_TIME in
 * the environment it prints "own_ns <ns>" to stderr at the end: the time
 * from the first region to the last. Built with -DREGION_STREAM_PLAIN it
 * makes the same calls without the user API (for function tracers such as
 * uftrace with -pg). Runs (as a no-op) without strobe too. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef REGION_STREAM_PLAIN
#define strobe_push_region(name) ((void)(name))
#define strobe_pop_region() ((void)0)
#else
#include <strobe.h>
#endif
#include <time.h>
#include <unistd.h>

static long regions;
static long pause_us;
static long slow_every;
static pthread_mutex_t out = PTHREAD_MUTEX_INITIALIZER;
static volatile long sink;

__attribute__((noinline)) static void leaf_a(long i) { sink += i; }
static unsigned long long now_ns(void);

__attribute__((noinline)) static void leaf_b(long i) {
    sink ^= i;
    if (slow_every > 0 && (i + 1) % slow_every == 0) {
        unsigned long long until = now_ns() + 50000;
        while (now_ns() < until) sink++;
    }
}

__attribute__((noinline)) static void mid(long i) {
    strobe_push_region("leaf_a");
    leaf_a(i);
    strobe_pop_region();
    strobe_push_region("leaf_b");
    leaf_b(i);
    strobe_pop_region();
}

static unsigned long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
}

static void *body(void *arg) {
    long thread = (long)arg;
    for (long i = 0; i < regions / 3; i++) {
        strobe_push_region("mid");
        mid(i);
        strobe_pop_region();
        if (pause_us > 0 && (i + 1) % 1000 == 0) {
            pthread_mutex_lock(&out);
            printf("%ld %ld %llu\n", thread, 3 * (i + 1), now_ns());
            fflush(stdout);
            pthread_mutex_unlock(&out);
            usleep((useconds_t)pause_us);
        }
    }
    for (long i = 0; i < regions % 3; i++) {
        strobe_push_region("leaf_a");
        leaf_a(i);
        strobe_pop_region();
    }
    return NULL;
}

int main(int argc, char **argv) {
    regions = argc > 1 ? atol(argv[1]) : 3000;
    long threads = argc > 2 ? atol(argv[2]) : 1;
    pause_us = argc > 3 ? atol(argv[3]) : 0;
    slow_every = argc > 4 ? atol(argv[4]) : 0;
    if (regions < 0 || threads < 1 || threads > 64) {
        fprintf(stderr, "usage: region_stream N [THREADS 1-64] [PAUSE_US]\n");
        return 2;
    }
    pthread_t t[64];
    unsigned long long start = now_ns();
    for (long k = 1; k < threads; k++) pthread_create(&t[k], NULL, body, (void *)k);
    body((void *)0);
    for (long k = 1; k < threads; k++) pthread_join(t[k], NULL);
    if (getenv("REGION_STREAM_TIME")) fprintf(stderr, "own_ns %llu\n", now_ns() - start);
    return 0;
}
