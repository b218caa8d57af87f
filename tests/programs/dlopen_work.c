/* Loads a library with dlopen (argv[1]) and spends argv[2] seconds of CPU
 * in it (split_work of libhotlib.c), starting no thread and closing
 * nothing: the runtime has no occasion to announce the library, so the
 * collector must find it in the process's memory map. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef void (*split_fn)(double, double, uint64_t, uint64_t *, uint64_t *);

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    void *lib = dlopen(argv[1], RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 3;
    }
    split_fn split = (split_fn)dlsym(lib, "split_work");
    if (!split) return 4;
    uint64_t a, b;
    split(atof(argv[2]), 0.7, 42, &a, &b);
    return 0;
}
