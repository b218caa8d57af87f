/* stress <self-path> <libhotlib-path> [rounds]: threads in waves, fork with
 * work in the children, exec, dlopen/dlclose in a loop, heavy malloc. When
 * run as "stress --exec-child" it does a little work and exits. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile double sink;

static double work(long n) {
    double x = 1.0;
    for (long i = 0; i < n; i++) x = x * 1.0000001 + 1.0 / (x + (double)i);
    return x;
}

static void *thread_body(void *arg) {
    long n = (long)(uintptr_t)arg;
    sink += work(20000 + n * 100);
    void *blocks[64];
    for (int i = 0; i < 64; i++) blocks[i] = malloc(16 + (size_t)(i * 97 % 4096));
    for (int i = 0; i < 64; i++) free(blocks[i]);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--exec-child") == 0) {
        sink += work(2000000);
        return 0;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: stress <self> <libhotlib.so> [rounds]\n");
        return 2;
    }
    int rounds = argc > 3 ? atoi(argv[3]) : 4;
    for (int r = 0; r < rounds; r++) {
        /* 256 threads in waves of 64. */
        for (int wave = 0; wave < 4; wave++) {
            pthread_t t[64];
            for (int i = 0; i < 64; i++)
                if (pthread_create(&t[i], NULL, thread_body, (void *)(uintptr_t)i) != 0) return 3;
            for (int i = 0; i < 64; i++) pthread_join(t[i], NULL);
        }
        /* fork with work in the child */
        pid_t child = fork();
        if (child == 0) {
            sink += work(3000000);
            exit(0);
        }
        int status = 0;
        waitpid(child, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 4;
        /* fork + exec */
        child = fork();
        if (child == 0) {
            execl(argv[1], argv[1], "--exec-child", (char *)NULL);
            _exit(127);
        }
        waitpid(child, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 5;
        /* dlopen/dlclose in a loop, calling into the library */
        for (int i = 0; i < 20; i++) {
            void *h = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
            if (!h) return 6;
            double (*hot_a)(long) = (double (*)(long))dlsym(h, "hot_a");
            if (!hot_a) return 7;
            sink += hot_a(200000);
            dlclose(h);
        }
        /* heavy malloc */
        for (int i = 0; i < 200000; i++) {
            char *p = malloc(32 + (size_t)(i % 2048));
            p[0] = (char)i;
            sink += p[0];
            free(p);
        }
    }
    return 0;
}
