/* fixedwork [million-iterations] [threads]: a fixed amount of CPU work
 * (70% in hot_a, 30% in hot_b, in libhotlib), so that wall time measures
 * profiler overhead. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

double hot_a(long iters);
double hot_b(long iters);

static long millions = 200;
static volatile double sink;

static void *worker(void *arg) {
    (void)arg;
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    long done = 0, total = millions * 1000000;
    while (done < total) {
        rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
        long chunk = 5000 + (long)(rng % 40000);
        if (rng % 10 < 7) sink += hot_a(chunk); else sink += hot_b(chunk);
        done += chunk;
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) millions = atol(argv[1]);
    int threads = argc > 2 ? atoi(argv[2]) : 1;
    pthread_t t[64];
    for (int i = 1; i < threads && i < 64; i++) pthread_create(&t[i], NULL, worker, NULL);
    worker(NULL);
    for (int i = 1; i < threads && i < 64; i++) pthread_join(t[i], NULL);
    return 0;
}
