/* Closes descriptors 3..1023 (as daemons do), then makes a pipe (its ends
 * take the lowest numbers, those strobe's counters had), writes a message
 * into it, burns CPU inside regions on two threads (samples and region
 * reads of counters happen meanwhile), reads the message back and checks
 * it: prints `pipe ok` and the pipe's descriptor numbers, exits 0, or
 * prints what went wrong and exits 3. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strobe.h>
#include <time.h>
#include <unistd.h>

static volatile double sink;

static void burn(long ms) {
    struct timespec a, b;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    double x = 1.0;
    do {
        for (int i = 0; i < 2000; i++) x = x * 1.0000001 + 1.0 / (x + i);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    } while ((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < ms);
    sink += x;
}

static void *work(void *arg) {
    (void)arg;
    for (int i = 0; i < 10; i++) {
        strobe_push_region("work");
        burn(15);
        strobe_pop_region();
    }
    return NULL;
}

int main(void) {
    for (int fd = 3; fd < 1024; fd++) close(fd);
    int p[2];
    if (pipe(p) != 0) return 2;
    const char *msg = "a message strobe must not read";
    if (write(p[1], msg, strlen(msg)) != (ssize_t)strlen(msg)) return 2;
    pthread_t t;
    pthread_create(&t, NULL, work, NULL);
    work(NULL);
    pthread_join(t, NULL);
    char buf[128] = {0};
    ssize_t n = read(p[0], buf, sizeof buf - 1);
    if (n != (ssize_t)strlen(msg) || memcmp(buf, msg, strlen(msg)) != 0) {
        printf("pipe lost data: read %zd bytes: '%s'\n", n, buf);
        return 3;
    }
    printf("pipe ok, fds %d %d\n", p[0], p[1]);
    return 0;
}
