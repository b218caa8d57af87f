/* main ends with pthread_exit: the process exits 0 when its last thread
 * ends. */
#include <pthread.h>
#include <stdio.h>
#include "burn.h"

int main(void) {
    burn_cpu(0.1);
    printf("main leaves by pthread_exit\n");
    fflush(stdout);
    pthread_exit(0);
}
