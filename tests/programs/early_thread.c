/* early_thread: a library-style constructor starts a thread before main
 * (and so before strobe's runtime starts collecting); it must be sampled. */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

static pthread_t early;
static volatile double sink;

__attribute__((noinline)) static double early_work(double seconds) {
    struct timespec t0, t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    double x = 1.0;
    do {
        for (int i = 0; i < 100000; i++) x = x * 1.0000001 + 1.0 / (x + i);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    } while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) * 1e-9 < seconds);
    return x;
}

static void *body(void *arg) {
    (void)arg;
    sink += early_work(1.0);
    return NULL;
}

__attribute__((constructor)) static void start_early(void) {
    pthread_create(&early, NULL, body, NULL);
}

int main(void) {
    pthread_join(early, NULL);
    return 0;
}
