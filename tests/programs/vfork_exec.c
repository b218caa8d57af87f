/* vfork_exec: starts /bin/true with vfork + execv (as subprocess launchers
 * do), then works for a second. The vfork child shares the parent's memory:
 * strobe must not finish the parent's profile from it. */
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(void) {
    for (int i = 0; i < 3; i++) {
        pid_t child = vfork();
        if (child == 0) {
            char *argv[] = {"true", NULL};
            execv("/bin/true", argv);
            _exit(127);
        }
        int status;
        waitpid(child, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 2;
    }
    struct timespec t0, t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    volatile double x = 1.0;
    do {
        for (int i = 0; i < 100000; i++) x = x * 1.0000001 + 1.0 / (x + i);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    } while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) * 1e-9 < 1.0);
    return 0;
}
