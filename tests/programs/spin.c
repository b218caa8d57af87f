/* spin [seconds]: burns CPU (for kill tests). */
#include <stdlib.h>
#include <time.h>

__attribute__((noinline)) double spin_step(void) {
    double x = 1.0;
    for (int i = 0; i < 100000; i++) x = x * 1.0000001 + 1.0 / (x + i);
    return x;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 10.0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    volatile double sink = 0;
    do {
        sink += spin_step();
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) * 1e-9 < seconds);
    return 0;
}
