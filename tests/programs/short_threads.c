/* Starts 100 threads one after another, each burning 2 ms of CPU: shorter
 * than the first period of a 250 Hz per-thread CPU-time timer. */
#include <pthread.h>
#include <stdio.h>
#include <time.h>

static volatile double sink;

static double thread_cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *worker(void *arg) {
    (void)arg;
    double end = thread_cpu() + 0.002;
    while (thread_cpu() < end)
        for (int i = 0; i < 1000; i++) sink += i * 0.5;
    return NULL;
}

int main(void) {
    for (int i = 0; i < 100; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, worker, NULL) != 0) return 2;
        pthread_join(t, NULL);
    }
    printf("100 threads done\n");
    return 0;
}
