/* Prints its pid, then burns argv[1] seconds of CPU (default 0.3): for
 * telling which database holds which run. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "burn.h"

int main(int argc, char **argv) {
    printf("%d\n", (int)getpid());
    fflush(stdout);
    burn_cpu(argc > 1 ? atof(argv[1]) : 0.3);
    return 0;
}
