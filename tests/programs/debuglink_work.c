/* debuglink_work: about 0.3 s of CPU in two internal (static) functions,
 * `linked_outer` calling `linked_inner`. The test strips the binary's
 * symbol table into a separate debug file named by `.gnu_debuglink`, so
 * that only that file names them. Prints the (meaningless) sum. */
#include <stdio.h>
#include <time.h>

static double cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static __attribute__((noinline)) unsigned long linked_inner(unsigned long x) {
    for (int i = 0; i < 100000; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
    return x;
}

static __attribute__((noinline)) unsigned long linked_outer(double seconds) {
    unsigned long x = 1;
    double end = cpu() + seconds;
    while (cpu() < end) x = linked_inner(x);
    return x;
}

int main(void) {
    printf("%lu\n", linked_outer(0.3) & 1);
    return 0;
}
