/* list_fds [fork]: prints this process's descriptors (`fd N: TARGET`,
 * with pipe and socket inode numbers left out, so that two runs compare)
 * from the main thread while a second thread is alive; with `fork`, then
 * forks and the child prints its own list the same way (prefixed
 * `child`), while the parent's second thread is still alive. */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void list(const char *who) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) exit(2);
    int own = dirfd(d);
    struct dirent *e;
    int fds[4096], n = 0;
    while ((e = readdir(d)) && n < 4096) {
        if (e->d_name[0] == '.') continue;
        int fd = atoi(e->d_name);
        if (fd != own) fds[n++] = fd;
    }
    closedir(d);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (fds[j] < fds[i]) { int t = fds[i]; fds[i] = fds[j]; fds[j] = t; }
    for (int i = 0; i < n; i++) {
        char path[64], target[256];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fds[i]);
        ssize_t len = readlink(path, target, sizeof target - 1);
        if (len < 0) continue;
        target[len] = 0;
        char *bracket = strchr(target, '[');
        if (bracket && (strncmp(target, "pipe:", 5) == 0 || strncmp(target, "socket:", 7) == 0))
            *bracket = 0;
        printf("%s fd %d: %s\n", who, fds[i], target);
    }
    fflush(stdout);
}

static int hold[2];

static void *waiter(void *arg) {
    (void)arg;
    char c;
    if (read(hold[0], &c, 1) < 0) return NULL;
    return NULL;
}

int main(int argc, char **argv) {
    if (pipe(hold) != 0) return 3;
    pthread_t t;
    pthread_create(&t, NULL, waiter, NULL);
    usleep(20000);
    list("main");
    if (argc > 1 && strcmp(argv[1], "fork") == 0) {
        pid_t pid = fork();
        if (pid == 0) {
            list("child");
            _exit(0);
        }
        int status;
        waitpid(pid, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 4;
    }
    if (write(hold[1], "x", 1) != 1) return 5;
    pthread_join(t, NULL);
    return 0;
}
