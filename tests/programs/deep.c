/* deep [depth] [seconds]: spins at the bottom of a real recursion. */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static uint64_t cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) double bottom(double seconds) {
    uint64_t end = cpu_ns() + (uint64_t)(seconds * 1e9);
    double x = 1.0;
    while (cpu_ns() < end)
        for (int i = 0; i < 10000; i++) x = x * 1.0000001 + 1.0 / (x + i);
    return x;
}

__attribute__((noinline)) double descend(int depth, double seconds) {
    volatile char frame[32];
    frame[depth & 31] = (char)depth;
    double r = depth == 0 ? bottom(seconds) : descend(depth - 1, seconds);
    __asm__ volatile("" : : "r"(frame) : "memory");
    return r + frame[depth & 31];
}

int main(int argc, char **argv) {
    int depth = argc > 1 ? atoi(argv[1]) : 200;
    double seconds = argc > 2 ? atof(argv[2]) : 1.0;
    return descend(depth, seconds) > 0 ? 0 : 1;
}
