/* causal_pool [items]: ground truth for causal profiling, a worker pool
 * limited by a lock.
 *
 * Four workers take items from a shared counter. For each item a worker
 * does parallel_work() outside the lock (30 units), then holds one pthread
 * mutex for locked_update() (70 units), then passes the progress point
 * "item". On two cores the lock is the bottleneck: an item costs
 * max(70, (70 + 30) / 2) units of wall time, so optimising locked_update()
 * by s% (-DSPEEDUP=s, integer percent, default 0) speeds the program up by
 * about s% (until s = 57, where the cores become the limit), while
 * optimising parallel_work() does nothing. Prints "checksum X" (a sum over
 * items, the same whatever order the workers take them in).
 *
 * The lines of the loop under test carry the comment causal-truth (inside
 * slash-star markers): `strobe-bench causal` reads their line numbers from
 * this file. With -DWITH_COZ the progress point is also Coz's. About 1 ms
 * per item; default 2000 items. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "strobe.h"
#ifdef WITH_COZ
#include <coz.h>
#endif

#ifndef SPEEDUP
#define SPEEDUP 0
#endif

#define WORKERS 4
#define LOCKED_STEPS (560000L * (100 - (SPEEDUP)) / 100)
#define PARALLEL_STEPS 240000L

/* One step of a dependent chain: shift, xor, multiply, add. */
#define STEP(x) ((x) = ((x) ^ ((x) >> 29)) * 0xbf58476d1ce4e5b9ull + 1)

static long items = 2000;
static long next_item; /* taken with __atomic_fetch_add */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t total; /* guarded by lock */

/* The serial section: called with `lock` held. */
__attribute__((noinline, noclone)) void locked_update(uint64_t v) {
    uint64_t x = v;
    for (long i = 0; i < LOCKED_STEPS; i++) STEP(x); /* causal-truth */
    total += x;
}

__attribute__((noinline, noclone)) uint64_t parallel_work(uint64_t item) {
    uint64_t x = item * 0x9e3779b97f4a7c15ull + 1;
    for (long i = 0; i < PARALLEL_STEPS; i++) STEP(x);
    return x;
}

static void *worker(void *arg) {
    (void)arg;
    for (;;) {
        long item = __atomic_fetch_add(&next_item, 1, __ATOMIC_RELAXED);
        if (item >= items) break;
        uint64_t v = parallel_work((uint64_t)item);
        pthread_mutex_lock(&lock);
        locked_update(v);
        pthread_mutex_unlock(&lock);
        strobe_progress("item");
#ifdef WITH_COZ
        COZ_PROGRESS_NAMED("item");
#endif
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) items = atol(argv[1]);
    pthread_t t[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        if (pthread_create(&t[i], NULL, worker, NULL) != 0) {
            perror("pthread_create");
            return 1;
        }
    }
    for (int i = 0; i < WORKERS; i++) pthread_join(t[i], NULL);
    printf("checksum %016llx\n", (unsigned long long)total);
    return 0;
}
