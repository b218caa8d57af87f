/* A thread made with a raw clone(2) (not pthread_create: no TLS, never seen
 * by a pthread_create wrapper) and the main thread both burn CPU. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static volatile int done;
static volatile double sink;

__attribute__((noinline)) static void raw_work(void) {
    double x = 1.0;
    for (long i = 0; i < 150000000L; i++) x = x * 1.0000001 + 0.5 / (x + (double)i);
    sink = x;
}

static int thread_main(void *arg) {
    (void)arg;
    raw_work();
    done = 1;
    syscall(SYS_exit, 0);
    return 0;
}

__attribute__((noinline)) static void main_work(void) {
    double x = 2.0;
    for (long i = 0; i < 150000000L; i++) x = x * 0.9999999 + 0.25 / (x + (double)i);
    sink += x;
}

int main(void) {
    size_t size = 1 << 20;
    char *stack = malloc(size);
    if (!stack) return 2;
    int flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM;
    if (clone(thread_main, stack + size, flags, NULL) < 0) return 3;
    main_work();
    while (!done) sched_yield();
    printf("both done\n");
    return 0;
}
