/* The variadic exec functions, which glibc implements by calling execve
 * internally (not through the PLT, so a preloaded execve never sees them).
 * Each collects its arguments and calls execv/execvp/execve, which the
 * runtime interposes (they finish the profile before the image goes).
 * Rust cannot define variadic functions, so the exported execl/execlp/execle
 * are naked Rust functions that jump here with the caller's frame intact. */
#define HIDDEN __attribute__((visibility("hidden")))
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <unistd.h>

#define STROBE_MAX_ARGS 4096

#define COLLECT(first, argv, ap)                                   \
    do {                                                           \
        size_t n = 0;                                              \
        argv[n++] = (char *)(first);                               \
        while (n < STROBE_MAX_ARGS) {                              \
            argv[n] = va_arg(ap, char *);                          \
            if (argv[n] == NULL) break;                            \
            n++;                                                   \
        }                                                          \
        if (n == STROBE_MAX_ARGS) { errno = E2BIG; va_end(ap); return -1; } \
    } while (0)

HIDDEN int strobe_execl(const char *path, const char *arg, ...) {
    char *argv[STROBE_MAX_ARGS + 1];
    va_list ap;
    va_start(ap, arg);
    COLLECT(arg, argv, ap);
    va_end(ap);
    return execv(path, argv);
}

HIDDEN int strobe_execlp(const char *file, const char *arg, ...) {
    char *argv[STROBE_MAX_ARGS + 1];
    va_list ap;
    va_start(ap, arg);
    COLLECT(arg, argv, ap);
    va_end(ap);
    return execvp(file, argv);
}

HIDDEN int strobe_execle(const char *path, const char *arg, ...) {
    char *argv[STROBE_MAX_ARGS + 1];
    va_list ap;
    va_start(ap, arg);
    COLLECT(arg, argv, ap);
    char *const *envp = va_arg(ap, char *const *);
    va_end(ap);
    return execve(path, argv, envp);
}
