/* Its own ITIMER_PROF every 10 ms with its own SIGPROF handler, for 1 s of
 * CPU: about 100 signals. Prints "ok" for 60..140 signals, else the count. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static volatile sig_atomic_t count;

static void on_prof(int sig) {
    (void)sig;
    count++;
}

static double process_cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_prof;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGPROF, &sa, NULL) != 0) return 2;
    struct itimerval it = {{0, 10000}, {0, 10000}};
    if (setitimer(ITIMER_PROF, &it, NULL) != 0) return 3;
    volatile unsigned long x = 1;
    double end = process_cpu_seconds() + 1.0;
    while (process_cpu_seconds() < end) {
        for (int i = 0; i < 10000; i++) x = x * 6364136223846793005UL + 1;
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_PROF, &off, NULL);
    int n = count;
    if (n >= 60 && n <= 140) {
        printf("ok\n");
    } else {
        printf("%d SIGPROF signals in 1 s of CPU at 10 ms\n", n);
    }
    return 0;
}
