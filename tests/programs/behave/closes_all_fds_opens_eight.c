/* Closes descriptors 3..65535, opens 8 files, works, writes distinct
 * content to each and exits 0. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "burn.h"

int main(void) {
    for (int fd = 3; fd < 65536; fd++) close(fd);
    int fds[8];
    for (int i = 0; i < 8; i++) {
        char name[32];
        snprintf(name, sizeof name, "file%d.txt", i);
        fds[i] = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fds[i] < 0) return 2;
    }
    burn_cpu(0.3);
    for (int i = 0; i < 8; i++) {
        char line[64];
        int n = snprintf(line, sizeof line, "this is file %d of 8, fd %d\n", i, fds[i]);
        for (int k = 0; k <= i; k++) {
            if (write(fds[i], line, (size_t)n) != n) return 3;
        }
        if (close(fds[i]) != 0) return 4;
    }
    return 0;
}
