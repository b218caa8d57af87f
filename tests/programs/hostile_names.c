/* hostile_names: names a program chooses, holding terminal escape
 * sequences (clear the screen, retitle the window, a C1 CSI, a
 * right-to-left override), in every place strobe prints names from: the
 * thread's kernel name (prctl), the runtime's thread name, a region and
 * a marker, and the function that burns the CPU is reached through a
 * region so both show in the summary. Prints one line; runs as a no-op
 * for the API without strobe. */
#include <stdio.h>
#include <strobe.h>
#include <sys/prctl.h>
#include <time.h>

#define HOSTILE "\033[2J\033]0;X\a"

static volatile double sink;

static double cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void burn(double seconds) {
    double start = cpu_seconds(), x = 1.0;
    while (cpu_seconds() - start < seconds)
        for (int i = 0; i < 10000; i++) x = x * 1.0000001 + 1.0 / (x + (double)i);
    sink += x;
}

int main(void) {
    prctl(PR_SET_NAME, HOSTILE, 0, 0, 0);
    strobe_set_thread_name("thread " HOSTILE "\xc2\x9b" "2J");
    strobe_push_region("region " HOSTILE "\xe2\x80\xae" "evil");
    burn(0.3);
    strobe_mark("marker " HOSTILE);
    strobe_pop_region();
    printf("named\n");
    return 0;
}
