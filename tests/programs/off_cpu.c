/* off_cpu: burns about 100 ms of CPU in burn(), then blocks 300 ms in
 * wait_here() (nanosleep), then 200 ms in wait_pipe() (a read that a
 * second thread answers). Off-CPU samples must put the blocked time in
 * the two waiting functions. */
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static int fds[2];

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

__attribute__((noinline)) double burn(double seconds) {
    double end = cpu_now() + seconds, x = 0;
    while (cpu_now() < end)
        for (int i = 0; i < 1000; i++) x += i * 0.5;
    return x;
}

__attribute__((noinline)) void wait_here(void) {
    struct timespec t = {0, 300 * 1000 * 1000};
    while (nanosleep(&t, &t) != 0) {}
}

static void *answer(void *arg) {
    (void)arg;
    usleep(200 * 1000);
    if (write(fds[1], "x", 1) != 1) perror("write");
    return NULL;
}

__attribute__((noinline)) void wait_pipe(void) {
    pthread_t t;
    pthread_create(&t, NULL, answer, NULL);
    char c;
    if (read(fds[0], &c, 1) != 1) perror("read");
    pthread_join(t, NULL);
}

int main(void) {
    if (pipe(fds) != 0) return 1;
    printf("%g\n", burn(0.1) > 0 ? 1.0 : 0.0);
    wait_here();
    wait_pipe();
    return 0;
}
