/* altstack_room: how much of an alternate signal stack strobe's sampling
 * handler uses. The program exports `_cgo_topofstack`, so strobe installs
 * its handler with SA_ONSTACK (as for Go) and every sample runs on the
 * 256 KiB alternate stack this program paints with a pattern. After 1 s
 * of CPU time in a 40-frame-deep recursion it prints how many bytes of
 * the stack were written (`altstack_used N`; 0 without strobe). Build
 * with -rdynamic. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

void _cgo_topofstack(void) {}

static volatile double sink;

__attribute__((noinline)) static double deep(int n) {
    volatile char frame[256];
    frame[0] = (char)n;
    if (n == 0) {
        double x = 1.0;
        for (int i = 0; i < 1000; i++) x = x * 1.0000001 + 1.0 / (x + (double)i);
        return x;
    }
    return deep(n - 1) + frame[0];
}

int main(void) {
    const size_t size = 256 * 1024;
    unsigned char *stack = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (stack == MAP_FAILED) return 2;
    memset(stack, 0xa5, size);
    stack_t ss = {.ss_sp = stack, .ss_size = size, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0) return 2;
    struct timespec t0, t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
    do {
        sink += deep(40);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 1000000000L);
    size_t untouched = 0;
    while (untouched < size && stack[untouched] == 0xa5) untouched++;
    printf("altstack_used %zu\n", size - untouched);
    return 0;
}
