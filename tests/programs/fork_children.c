/* fork_children N [exec]: forks N children one after another (waiting for
 * each); each records one region "child_work" (about 0.2 ms of CPU) through
 * the user API and _exits at once. With "exec", each child first execs this
 * program again as "fork_children child", which does the same: a second
 * image of the same pid. Prints "children N" when done. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strobe.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile double sink;

static void child_work(void) {
    strobe_push_region("child_work");
    double x = 1.0;
    for (int k = 0; k < 100000; k++) x = x * 1.0000001 + 1.0 / (x + k);
    sink = x;
    strobe_pop_region();
    _exit(0);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "child") == 0) child_work();
    int n = argc > 1 ? atoi(argv[1]) : 100;
    int exec = argc > 2 && strcmp(argv[2], "exec") == 0;
    for (int i = 0; i < n; i++) {
        pid_t p = fork();
        if (p == 0) {
            if (exec) {
                execl("/proc/self/exe", "fork_children", "child", (char *)NULL);
                _exit(127);
            }
            child_work();
        }
        int status;
        if (p < 0 || waitpid(p, &status, 0) != p || status != 0) return 1;
    }
    printf("children %d\n", n);
    return 0;
}
