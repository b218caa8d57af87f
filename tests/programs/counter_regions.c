/* counter_regions CPU_REGIONS MS TOUCH_REGIONS PAGES: on the main thread,
 * CPU_REGIONS regions "burn" each burning MS ms of CPU time, then
 * TOUCH_REGIONS regions "touch" each writing one byte to each of PAGES
 * fresh pages (so at least PAGES page faults each). Prints one line per
 * region: `<name> <index> wall_ns=<N> cpu_ns=<N>` (the thread's CPU time
 * and the elapsed time inside the region, measured by the program). */
#include <stdio.h>
#include <stdlib.h>
#include <strobe.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static long long now(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static volatile double sink;

static void burn(long ms) {
    long long start = now(CLOCK_THREAD_CPUTIME_ID);
    double x = 1.0;
    while (now(CLOCK_THREAD_CPUTIME_ID) - start < ms * 1000000LL)
        for (int i = 0; i < 2000; i++) x = x * 1.0000001 + 1.0 / (x + i);
    sink += x;
}

static void touch(long pages) {
    long size = sysconf(_SC_PAGESIZE);
    char *p = mmap(NULL, pages * size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) exit(99);
    for (long i = 0; i < pages; i++) p[i * size] = 1;
    munmap(p, pages * size);
}

int main(int argc, char **argv) {
    int cpu_regions = argc > 1 ? atoi(argv[1]) : 5;
    long ms = argc > 2 ? atol(argv[2]) : 30;
    int touch_regions = argc > 3 ? atoi(argv[3]) : 3;
    long pages = argc > 4 ? atol(argv[4]) : 2000;
    for (int i = 0; i < cpu_regions; i++) {
        strobe_push_region("burn");
        long long w = now(CLOCK_MONOTONIC), c = now(CLOCK_THREAD_CPUTIME_ID);
        burn(ms);
        c = now(CLOCK_THREAD_CPUTIME_ID) - c;
        w = now(CLOCK_MONOTONIC) - w;
        strobe_pop_region();
        printf("burn %d wall_ns=%lld cpu_ns=%lld\n", i, w, c);
    }
    for (int i = 0; i < touch_regions; i++) {
        strobe_push_region("touch");
        long long w = now(CLOCK_MONOTONIC), c = now(CLOCK_THREAD_CPUTIME_ID);
        touch(pages);
        c = now(CLOCK_THREAD_CPUTIME_ID) - c;
        w = now(CLOCK_MONOTONIC) - w;
        strobe_pop_region();
        printf("touch %d wall_ns=%lld cpu_ns=%lld\n", i, w, c);
    }
    return 0;
}
