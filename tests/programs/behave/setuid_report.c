/* Installed setuid by the test: reports whether it runs with an effective
 * uid different from the real one, after a little work. */
#include <stdio.h>
#include <unistd.h>
#include "burn.h"

int main(void) {
    burn_cpu(0.2);
    printf("%s\n", geteuid() != getuid() ? "setuid" : "not setuid");
    return 0;
}
