/* hotspots [share_a] [seconds] [threads]: each thread spends `seconds` of CPU
 * time split between hot_a and hot_b (in libhotlib). Prints the true shares
 * as "truth <tid> <ns_a> <ns_b>" lines on stderr when STROBE_TEST_TRUTH is set. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

void split_work(double seconds, double share_a, uint64_t seed, uint64_t *ns_a, uint64_t *ns_b);

static double share = 0.7, seconds = 1.0;

static void *worker(void *arg) {
    uint64_t a, b;
    split_work(seconds, share, (uint64_t)(uintptr_t)arg * 7919 + 17, &a, &b);
    if (getenv("STROBE_TEST_TRUTH"))
        fprintf(stderr, "truth %ld %llu %llu\n", (long)syscall(SYS_gettid),
                (unsigned long long)a, (unsigned long long)b);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) share = atof(argv[1]);
    if (argc > 2) seconds = atof(argv[2]);
    int threads = argc > 3 ? atoi(argv[3]) : 0;
    pthread_t t[64];
    for (int i = 0; i < threads && i < 64; i++) pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
    worker(NULL);
    for (int i = 0; i < threads && i < 64; i++) pthread_join(t[i], NULL);
    return 0;
}
