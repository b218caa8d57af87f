/* oversubscribed [seconds]: four workers each spend `seconds` (default 1)
 * of CPU time, 20/40/60/80% of it in hot_a and the rest in hot_b (in
 * libhotlib), while a fifth thread sleeps. With more workers than cores
 * the threads are preempted mid-work. Prints "truth <tid> <ns_a> <ns_b>"
 * per worker on stderr. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

void split_work(double seconds, double share_a, uint64_t seed, uint64_t *ns_a, uint64_t *ns_b);

static double seconds = 1.0;
static volatile int done;

static void *worker(void *arg) {
    int i = (int)(uintptr_t)arg;
    uint64_t a, b;
    split_work(seconds, 0.2 * i, (uint64_t)i * 7919 + 17, &a, &b);
    fprintf(stderr, "truth %ld %llu %llu\n", (long)syscall(SYS_gettid),
            (unsigned long long)a, (unsigned long long)b);
    return NULL;
}

static void *sleeper(void *arg) {
    (void)arg;
    while (!done) usleep(10000);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) seconds = atof(argv[1]);
    pthread_t w[4], s;
    pthread_create(&s, NULL, sleeper, NULL);
    for (int i = 0; i < 4; i++) pthread_create(&w[i], NULL, worker, (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < 4; i++) pthread_join(w[i], NULL);
    done = 1;
    pthread_join(s, NULL);
    return 0;
}
