/* 5000 threads with 64 KiB stacks, all created before any is joined. */
#include <pthread.h>
#include <stdio.h>

#define N 5000

static void *work(void *arg) {
    volatile unsigned long x = (unsigned long)arg;
    for (int i = 0; i < 2000; i++) x = x * 6364136223846793005UL + 1;
    return (void *)(x & 1);
}

static pthread_t threads[N];

int main(void) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    if (pthread_attr_setstacksize(&attr, 64 * 1024) != 0) return 2;
    for (long i = 0; i < N; i++) {
        if (pthread_create(&threads[i], &attr, work, (void *)i) != 0) {
            printf("pthread_create failed at %ld\n", i);
            return 3;
        }
    }
    for (int i = 0; i < N; i++) pthread_join(threads[i], NULL);
    printf("done\n");
    return 0;
}
