/* fork_children N: forks N children one after another; each records one
 * region "child_work" (about 200 us of CPU) through the user API and
 * _exits at once; the parent waits for each before the next. Prints
 * "children N" when done. */
#include <stdio.h>
#include <stdlib.h>
#include <strobe.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile double sink;

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 100;
    for (int i = 0; i < n; i++) {
        pid_t p = fork();
        if (p == 0) {
            strobe_push_region("child_work");
            double x = 1.0;
            for (int k = 0; k < 100000; k++) x = x * 1.0000001 + 1.0 / (x + k);
            sink = x;
            strobe_pop_region();
            _exit(0);
        }
        if (p < 0 || waitpid(p, NULL, 0) != p) return 1;
    }
    printf("children %d\n", n);
    return 0;
}
