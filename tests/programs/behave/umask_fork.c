/* umask(0777), then fork: parent and child each burn 0.2 s of CPU and write
 * nothing; the parent waits for the child. */
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "burn.h"

int main(void) {
    umask(0777);
    pid_t pid = fork();
    if (pid < 0) return 2;
    burn_cpu(0.2);
    if (pid == 0) _exit(0);
    int status;
    if (waitpid(pid, &status, 0) != pid) return 3;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 4;
    printf("parent and child done\n");
    return 0;
}
