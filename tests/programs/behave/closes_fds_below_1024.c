/* Closes every descriptor from 3 to 1023 (as daemons and shells do), then
 * opens a file, writes it, burns 0.3 s of CPU and returns 0. */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include "burn.h"

int main(void) {
    for (int fd = 3; fd < 1024; fd++) close(fd);
    int f = open("out.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (f < 0) return 2;
    const char *msg = "written after closing 3..1023\n";
    if (write(f, msg, strlen(msg)) != (ssize_t)strlen(msg)) return 3;
    burn_cpu(0.3);
    if (write(f, msg, strlen(msg)) != (ssize_t)strlen(msg)) return 4;
    if (close(f) != 0) return 5;
    return 0;
}
