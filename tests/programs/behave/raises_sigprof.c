/* Raises SIGPROF with its default action: the process dies by it. */
#include <signal.h>
#include <stdio.h>
#include "burn.h"

int main(void) {
    burn_cpu(0.1);
    raise(SIGPROF);
    puts("still alive");
    return 0;
}
