/* causal_threads [iterations]: ground truth for causal profiling, two
 * threads that meet at a join.
 *
 * Each iteration starts two threads together and joins both, then passes
 * the progress point "iteration": thread A runs long_side() (60 units of
 * work), thread B runs short_side() (40 units). An iteration lasts as long
 * as its longer side, so optimising long_side() by s% (-DSPEEDUP=s, integer
 * percent, default 0) speeds the program up by s% only until long_side()
 * is as short as short_side() (s = 33): beyond that the real speedup stays
 * flat at about 1/3 (less the fixed cost of starting two threads). Needs
 * two cores for the sides to overlap. Prints "checksum X".
 *
 * The lines of the loop under test carry the comment causal-truth (inside
 * slash-star markers): `strobe-bench causal` reads their line numbers from
 * this file. With -DWITH_COZ the progress point is also Coz's. About 10 ms
 * per iteration on an idle two-core machine (long enough that a profiler
 * sampling each thread's CPU time every 1-4 ms sees both sides); default
 * 200 iterations. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "strobe.h"
#ifdef WITH_COZ
#include <coz.h>
#endif

#ifndef SPEEDUP
#define SPEEDUP 0
#endif

#define LONG_STEPS (6000000L * (100 - (SPEEDUP)) / 100)
#define SHORT_STEPS 4000000L

/* One step of a dependent chain: shift, xor, multiply, add. */
#define STEP(x) ((x) = ((x) ^ ((x) >> 29)) * 0xbf58476d1ce4e5b9ull + 1)

__attribute__((noinline, noclone)) uint64_t long_side(uint64_t x) {
    for (long i = 0; i < LONG_STEPS; i++) STEP(x); /* causal-truth */
    return x;
}

__attribute__((noinline, noclone)) uint64_t short_side(uint64_t x) {
    for (long i = 0; i < SHORT_STEPS; i++) STEP(x);
    return x;
}

static void *thread_a(void *arg) {
    uint64_t *x = arg;
    *x = long_side(*x);
    return NULL;
}

static void *thread_b(void *arg) {
    uint64_t *x = arg;
    *x = short_side(*x);
    return NULL;
}

int main(int argc, char **argv) {
    long iterations = argc > 1 ? atol(argv[1]) : 200;
    uint64_t a = 0x9e3779b97f4a7c15ull, b = 0x2545f4914f6cdd1dull;
    for (long it = 0; it < iterations; it++) {
        pthread_t ta, tb;
        if (pthread_create(&ta, NULL, thread_a, &a) != 0 || pthread_create(&tb, NULL, thread_b, &b) != 0) {
            perror("pthread_create");
            return 1;
        }
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        strobe_progress("iteration");
#ifdef WITH_COZ
        COZ_PROGRESS_NAMED("iteration");
#endif
    }
    printf("checksum %016llx\n", (unsigned long long)(a ^ b));
    return 0;
}
