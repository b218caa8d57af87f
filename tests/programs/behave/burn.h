/* Shared by the behave/ programs: spin for a given amount of the calling
 * thread's CPU time. */
#ifndef BEHAVE_BURN_H
#define BEHAVE_BURN_H
#include <time.h>

static double thread_cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Returns a value that depends on the work so the compiler keeps it. */
static unsigned long burn_cpu(double seconds) {
    volatile unsigned long x = 1;
    double end = thread_cpu_seconds() + seconds;
    while (thread_cpu_seconds() < end) {
        for (int i = 0; i < 10000; i++) {
            x = x * 6364136223846793005UL + 1442695040888963407UL;
        }
    }
    return x;
}
#endif
