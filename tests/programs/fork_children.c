/* fork_children N [exec]: forks N children one after another (waiting for
 * each); each records one region "child_work" (about 0.2 ms of CPU) through
 * the user API and _exits at once. With "exec", each child first execs this
 * program again as "fork_children child", which does the same: a second
 * image of the same pid. Prints "children N" when done.
 * fork_children kill MS: forks one child that burns CPU in child_burn (no
 * event of its own) until the parent kills it with SIGKILL after MS ms;
 * prints "killed PID". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strobe.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
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

__attribute__((noinline)) static void child_burn(void) {
    double x = 1.0;
    for (long k = 0;; k++) {
        x = x * 1.0000001 + 1.0 / (x + (double)k);
        sink = x;
    }
}

static int kill_after(long ms) {
    pid_t p = fork();
    if (p == 0) child_burn();
    if (p < 0) return 1;
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
    kill(p, SIGKILL);
    int status;
    if (waitpid(p, &status, 0) != p || !WIFSIGNALED(status)) return 1;
    printf("killed %d\n", (int)p);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "child") == 0) child_work();
    if (argc > 2 && strcmp(argv[1], "kill") == 0) return kill_after(atol(argv[2]));
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
