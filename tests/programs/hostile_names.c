/* hostile_names: names a program chooses, holding terminal escape
 * sequences (clear the screen, retitle the window, a C1 CSI, a
 * right-to-left override) and markup (<, >, &, quotes), in every place
 * strobe prints names from: the thread's kernel name (prctl), the
 * runtime's thread name, a region and a marker, and a function of JIT
 * code named in /tmp/perf-<pid>.map (0.3 s of CPU in it, inside the
 * region). Prints one line; the API calls are no-ops without strobe. */
#include <stdio.h>
#include <string.h>
#include <strobe.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define HOSTILE "\033[2J\033]0;X\a"

static volatile double sink;

static double cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Counting-loop machine code (x86-64) in executable memory, named in the
 * perf map as a JIT would; NULL when it cannot be made. */
static void (*jit_loop(void))(long) {
    /* mov rcx, rdi; 1: dec rcx; jnz 1b; ret */
    static const unsigned char code[] = {0x48, 0x89, 0xf9, 0x48, 0xff, 0xc9, 0x75, 0xfb, 0xc3};
    unsigned char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) return NULL;
    memcpy(page, code, sizeof code);
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
    FILE *map = fopen(path, "w");
    if (!map) return NULL;
    fprintf(map, "%lx %zx jit " HOSTILE " <b>&amp;\"'</b>\n", (unsigned long)page, sizeof code);
    fclose(map);
    return (void (*)(long))page;
}

static void burn(double seconds) {
    void (*loop)(long) = jit_loop();
    double start = cpu_seconds(), x = 1.0;
    while (cpu_seconds() - start < seconds) {
        if (loop) loop(1000000);
        else for (int i = 0; i < 10000; i++) x = x * 1.0000001 + 1.0 / (x + (double)i);
    }
    sink += x;
}

int main(void) {
    prctl(PR_SET_NAME, HOSTILE, 0, 0, 0);
    strobe_set_thread_name("thread " HOSTILE "\xc2\x9b" "2J");
    strobe_push_region("region " HOSTILE "\xe2\x80\xae" "evil");
    burn(0.3);
    strobe_mark("marker " HOSTILE);
    strobe_pop_region();
    printf("named\n");
    return 0;
}
