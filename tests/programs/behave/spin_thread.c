/* Burns CPU in one worker thread for argv[1] seconds (default 3) while main
 * waits in pthread_join; for the SIGKILL test. */
#include <pthread.h>
#include <stdlib.h>
#include "burn.h"

static double seconds = 3.0;

static void *worker(void *arg) {
    (void)arg;
    burn_cpu(seconds);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) seconds = atof(argv[1]);
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0) return 2;
    pthread_join(t, NULL);
    return 0;
}
