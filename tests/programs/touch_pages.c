/* touch_pages PAGES MILLISECONDS [THREADS] [EXIT]: touches PAGES fresh
 * pages (one write each, so at least PAGES page faults), then burns about
 * MILLISECONDS of CPU time in each of THREADS threads; prints the
 * process's own CPU time in nanoseconds and the pages touched, and exits
 * with EXIT (for `strobe stat` tests). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static long burn_ms;

static double cpu_seconds(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *burn(void *arg) {
    (void)arg;
    volatile double x = 1.0;
    double start = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
    while (cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - start < burn_ms * 1e-3)
        for (int i = 0; i < 1000; i++) x = x * 1.0000001 + 1.0 / (x + i);
    return NULL;
}

int main(int argc, char **argv) {
    long pages = argc > 1 ? atol(argv[1]) : 1000;
    burn_ms = argc > 2 ? atol(argv[2]) : 100;
    int threads = argc > 3 ? atoi(argv[3]) : 1;
    int code = argc > 4 ? atoi(argv[4]) : 0;
    long size = sysconf(_SC_PAGESIZE);
    char *p = mmap(NULL, pages * size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 99;
    for (long i = 0; i < pages; i++) p[i * size] = 1;
    pthread_t t[64];
    for (int i = 1; i < threads && i < 64; i++) pthread_create(&t[i], NULL, burn, NULL);
    burn(NULL);
    for (int i = 1; i < threads && i < 64; i++) pthread_join(t[i], NULL);
    printf("cpu_ns=%.0f pages=%ld\n", cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) * 1e9, pages);
    return code;
}
