/* causal_serial [iterations]: ground truth for causal profiling, one thread.
 *
 * Each iteration calls hot() (60% of the iteration at SPEEDUP=0) and then
 * cold() (40%), then passes the progress point "iteration". Build with
 * -DSPEEDUP=s (integer percent, default 0) and hot() does s% less work, so
 * the real effect of optimising hot() by s% is a program speedup of 0.6 s.
 * Both functions run the same dependent integer chain (no memory traffic),
 * so time is proportional to the number of steps. Prints "checksum X".
 *
 * An iteration's length varies (50% to 150% of the mean, from a fixed
 * pseudo-random sequence; both functions scale together, so the 60/40
 * split holds in every iteration). A loop of fixed length near 1 ms would
 * keep the same phase against a sampler whose period is a multiple of it
 * (the kernel tick fires per-thread CPU-time timers every 4 ms): for
 * seconds, every sample would land in one of the two functions. That
 * aliasing is a limit of periodic samplers (docs/causal.md), not what this
 * program measures.
 *
 * The lines of the loop under test carry the comment causal-truth (inside
 * slash-star markers): `strobe-bench causal` reads their line numbers from
 * this file. With -DWITH_COZ the progress point is also Coz's. About 1 ms
 * per iteration; default 2000 iterations. */
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

#define HOT_STEPS (360000L * (100 - (SPEEDUP)) / 100)
#define COLD_STEPS 240000L

/* One step of a dependent chain: shift, xor, multiply, add. */
#define STEP(x) ((x) = ((x) ^ ((x) >> 29)) * 0xbf58476d1ce4e5b9ull + 1)

/* hot() and cold() do their steps times scale/100. */
__attribute__((noinline, noclone)) uint64_t hot(uint64_t x, long scale) {
    for (long i = 0; i < HOT_STEPS * scale / 100; i++) STEP(x); /* causal-truth */
    return x;
}

__attribute__((noinline, noclone)) uint64_t cold(uint64_t x, long scale) {
    for (long i = 0; i < COLD_STEPS * scale / 100; i++) STEP(x);
    return x;
}

/* The next iteration's scale, 50 to 150 (percent), from a xorshift
 * sequence: the same in every build and every run. */
static long next_scale(uint64_t *state) {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return 50 + (long)(*state % 101);
}

int main(int argc, char **argv) {
    long iterations = argc > 1 ? atol(argv[1]) : 2000;
    uint64_t x = 0x9e3779b97f4a7c15ull, lengths = 0x2545f4914f6cdd1dull;
    for (long it = 0; it < iterations; it++) {
        long scale = next_scale(&lengths);
        x = hot(x, scale);
        x = cold(x, scale);
        strobe_progress("iteration");
#ifdef WITH_COZ
        COZ_PROGRESS_NAMED("iteration");
#endif
    }
    printf("checksum %016llx\n", (unsigned long long)x);
    return 0;
}
