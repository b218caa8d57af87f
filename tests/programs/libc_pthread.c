/* libc_pthread: a thread made by libc's own pthread_create, looked up in
 * libc with dlsym as jemalloc does for its background threads (so no
 * preloaded wrapper sees it), burns 1 s of CPU in `direct_work` while
 * the main thread waits for it. Prints "joined". */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

static volatile double sink;

static double thread_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

__attribute__((noinline)) static void *direct_work(void *arg) {
    (void)arg;
    double start = thread_seconds(), x = 1.0;
    while (thread_seconds() - start < 1.0)
        for (int i = 0; i < 10000; i++) x = x * 1.0000001 + 1.0 / (x + (double)i);
    sink += x;
    return NULL;
}

int main(void) {
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    create_fn create = libc ? (create_fn)dlsym(libc, "pthread_create") : NULL;
    pthread_t t;
    if (!create || create(&t, NULL, direct_work, NULL) != 0) return 2;
    pthread_join(t, NULL);
    puts("joined");
    return 0;
}
