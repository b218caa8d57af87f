/* crash [seconds]: works for that much CPU time (1.5 s by default: its own
 * clock, so a loaded machine does not shorten the work), then dereferences
 * NULL. */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

__attribute__((noinline)) double busy(double seconds) {
    struct timespec t0, t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
    double x = 1.0;
    do {
        for (int i = 0; i < 100000; i++) x = x * 1.0000001 + 1.0 / (x + i);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    } while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) * 1e-9 < seconds);
    return x;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 1.5;
    volatile double r = busy(seconds);
    volatile int *p = (int *)(uintptr_t)(r < 0 ? 1 : 0);
    return *p;
}
