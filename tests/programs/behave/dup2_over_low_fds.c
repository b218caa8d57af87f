/* Makes descriptors 3..19 all refer to one file with dup2, works, then
 * writes 4 bytes through descriptor 5: the file must hold those 4 bytes. */
#include <fcntl.h>
#include <unistd.h>
#include "burn.h"

int main(void) {
    int f = open("four.bin", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (f < 0) return 2;
    for (int fd = 3; fd < 20; fd++) {
        if (fd != f && dup2(f, fd) != fd) return 3;
    }
    burn_cpu(0.3);
    if (write(5, "abcd", 4) != 4) return 4;
    return 0;
}
