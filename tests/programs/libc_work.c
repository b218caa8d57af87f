/* libc_work: spends about 0.5 s of CPU copying memory with memcpy, whose
 * implementation (e.g. __memmove_avx_unaligned_erms) is an internal libc
 * function: named only from libc's separate debug file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(void) {
    size_t n = 1 << 22;
    char *a = malloc(n), *b = malloc(n);
    memset(a, 1, n);
    double end = cpu() + 0.5;
    unsigned long sum = 0;
    while (cpu() < end) {
        memcpy(b, a, n);
        sum += (unsigned char)b[n / 2];
        memcpy(a, b, n);
    }
    printf("%lu\n", sum > 0 ? 1UL : 0UL);
    return 0;
}
