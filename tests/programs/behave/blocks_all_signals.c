/* Blocks every signal in main before starting a worker (which inherits the
 * mask); both burn CPU. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include "burn.h"

static void *worker(void *arg) {
    (void)arg;
    burn_cpu(0.3);
    return NULL;
}

int main(void) {
    sigset_t all;
    sigfillset(&all);
    if (pthread_sigmask(SIG_BLOCK, &all, NULL) != 0) return 2;
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0) return 3;
    burn_cpu(0.3);
    pthread_join(t, NULL);
    printf("both threads done\n");
    return 0;
}
