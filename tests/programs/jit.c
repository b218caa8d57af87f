/* jit: writes a counting loop as machine code into anonymous executable
 * memory (x86-64), names it in /tmp/perf-<pid>.map as a JIT would, and
 * runs it for about 0.5 s of CPU. Prints "jitted" when done. */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(void) {
    /* mov rcx, rdi; 1: dec rcx; jnz 1b; ret */
    static const unsigned char code[] = {0x48, 0x89, 0xf9, 0x48, 0xff, 0xc9, 0x75, 0xfb, 0xc3};
    unsigned char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) return 1;
    memcpy(page, code, sizeof code);
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
    FILE *map = fopen(path, "w");
    if (!map) return 1;
    fprintf(map, "%lx %zx jitted_loop\n", (unsigned long)page, sizeof code);
    fclose(map);
    void (*loop)(long) = (void (*)(long))page;
    double end = cpu() + 0.5;
    while (cpu() < end) loop(10000000);
    printf("jitted\n");
    return 0;
}
