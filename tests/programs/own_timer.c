/* own_timer: a library-style constructor installs its own SIGPROF handler
 * and a POSIX timer on SIGPROF carrying a pointer of its own. strobe shares
 * the signal: the program's timer signals must still reach its handler, and
 * its pointer must never be taken for strobe's. Exits 0 when its handler saw
 * enough of its own ticks. Works for 1 s of its own CPU time (not wall time:
 * a loaded machine does not shorten the work). */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

struct ticks { volatile long count; long magic; };
static struct ticks mine = {0, 0x5eed};

static void on_prof(int sig, siginfo_t *info, void *ctx) {
    (void)sig; (void)ctx;
    if (info->si_code == SI_TIMER && info->si_value.sival_ptr == &mine) mine.count++;
}

__attribute__((constructor)) static void setup(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_prof;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGPROF, &sa, NULL);
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_SIGNAL;
    ev.sigev_signo = SIGPROF;
    ev.sigev_value.sival_ptr = &mine;
    timer_t t;
    timer_create(CLOCK_MONOTONIC, &ev, &t);
    struct itimerspec its = {{0, 2000000}, {0, 2000000}}; /* 500 Hz */
    timer_settime(t, 0, &its, NULL);
}

int main(void) {
    struct timespec t0, t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
    volatile double x = 1.0;
    do {
        for (int i = 0; i < 100000; i++) x = x * 1.0000001 + 1.0 / (x + i);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    } while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) * 1e-9 < 1.0);
    printf("own ticks %ld\n", mine.count);
    return mine.count > 100 ? 0 : 1;
}
