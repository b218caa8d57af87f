/* Works a little, then execs argv[1] (with the remaining arguments) with an
 * empty environment. */
#include <stdio.h>
#include <unistd.h>
#include "burn.h"

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    burn_cpu(0.1);
    printf("exec %s\n", argv[1]);
    fflush(stdout);
    char *empty[] = {NULL};
    execve(argv[1], argv + 1, empty);
    perror("execve");
    return 3;
}
