/* A parent that starts a child and leaves at once (or waits for it).
 *
 *   leave_child fork OUT        fork; the parent returns at once, the child
 *                               ends with exit() (atexit handlers run)
 *   leave_child spawn OUT       posix_spawn(self child OUT) with
 *                               LEAVE_CHILD_SLOW_MS=300 (libslowstart delays
 *                               the child's start-up); returns at once
 *   leave_child popen OUT       popen("exec SELF child OUT") and return at
 *                               once, without pclose
 *   leave_child spawn_wait EXE OUT
 *                               posix_spawn(EXE child OUT) and wait for it
 *   leave_child child OUT       what the child does: let the parent end,
 *                               burn 0.2 s of CPU, write "child PID done" to OUT
 *   leave_child wait            burn 0.2 s, then print what wait(NULL) returns
 *                               (a process with no child: -1, ECHILD)
 */
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static volatile double sink;

static double cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void burn(double seconds) {
    double end = cpu_seconds() + seconds;
    while (cpu_seconds() < end)
        for (int i = 0; i < 10000; i++) sink += i * 0.5;
}

static int child(const char *out) {
    usleep(100 * 1000);
    burn(0.2);
    FILE *f = fopen(out, "w");
    if (!f) return 4;
    fprintf(f, "child %d done\n", (int)getpid());
    return fclose(f) == 0 ? 0 : 5;
}

static int spawn(const char *exe, const char *out, int wait) {
    char *argv[] = {(char *)exe, "child", (char *)out, NULL};
    int n = 0;
    while (environ[n]) n++;
    char **env = calloc(n + 2, sizeof *env);
    if (!env) return 3;
    memcpy(env, environ, n * sizeof *env);
    if (!wait) env[n] = "LEAVE_CHILD_SLOW_MS=300";
    pid_t pid;
    int rc = posix_spawn(&pid, exe, NULL, NULL, argv, env);
    if (rc != 0) {
        fprintf(stderr, "posix_spawn: %s\n", strerror(rc));
        return 3;
    }
    if (!wait) return 0;
    int status;
    if (waitpid(pid, &status, 0) != pid) return 6;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 7;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "child") == 0) return child(argv[2]);
    if (argc == 2 && strcmp(argv[1], "wait") == 0) {
        burn(0.2);
        pid_t r = wait(NULL);
        printf("wait: %d %s\n", (int)r, r < 0 ? strerror(errno) : "a child");
        return 3;
    }
    if (argc == 3 && strcmp(argv[1], "fork") == 0) {
        pid_t pid = fork();
        if (pid < 0) return 3;
        if (pid == 0) exit(child(argv[2]));
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "spawn") == 0) return spawn("/proc/self/exe", argv[2], 0);
    if (argc == 3 && strcmp(argv[1], "popen") == 0) {
        char self[4096], command[8300];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0) return 3;
        self[n] = 0;
        snprintf(command, sizeof command, "exec '%s' child '%s'", self, argv[2]);
        return popen(command, "r") ? 0 : 3;
    }
    if (argc == 4 && strcmp(argv[1], "spawn_wait") == 0) return spawn(argv[2], argv[3], 1);
    fprintf(stderr, "usage: leave_child fork|spawn|popen OUT | spawn_wait EXE OUT | child OUT | wait\n");
    return 2;
}
