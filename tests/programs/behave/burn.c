/* Burns argv[1] seconds of CPU (default 0.3), then prints argv[2] if given. */
#include <stdio.h>
#include <stdlib.h>
#include "burn.h"

int main(int argc, char **argv) {
    burn_cpu(argc > 1 ? atof(argv[1]) : 0.3);
    if (argc > 2) printf("%s\n", argv[2]);
    return 0;
}
