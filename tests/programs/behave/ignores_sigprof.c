/* Ignores SIGPROF, then burns CPU. */
#include <signal.h>
#include <stdio.h>
#include "burn.h"

int main(void) {
    signal(SIGPROF, SIG_IGN);
    burn_cpu(0.5);
    printf("done\n");
    return 0;
}
