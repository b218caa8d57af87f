/* own_faults: a program that handles its own faults, as JVMs, Go,
 * garbage collectors and databases do, for 0.25 s of CPU time per kind
 * (so that a profiler's timer signal lands in every phase of them):
 *   SIGSEGV  write to a read-only page; handler on an 8 KiB alternate
 *            stack (SA_ONSTACK), leaves with siglongjmp;
 *   SIGBUS   read past the end of a truncated file mapping; SA_NODEFER,
 *            siglongjmp;
 *   SIGILL   ud2; the handler skips the instruction in the ucontext;
 *   SIGTRAP  int3; the handler returns (the kernel resumes after it);
 *   SIGFPE   integer division by zero; siglongjmp;
 *   SIGABRT  abort(); SA_RESETHAND (re-installed each time), siglongjmp.
 * After installing each handler it checks that sigaction reports exactly
 * what it installed (flags and mask), and in each handler that the
 * siginfo is the one the fault gives. Prints one line per kind and exits
 * 0 only when everything held; the output is the same on every run. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#ifndef SA_RESTORER
#define SA_RESTORER 0x04000000 /* set by libc, not by the program */
#endif

static sigjmp_buf env;
static volatile long handled, bad_info;
static volatile int expect_signo, expect_code;
static void *volatile expect_addr;

static double cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void check(siginfo_t *info) {
    handled++;
    if (info->si_signo != expect_signo || (expect_code && info->si_code != expect_code) ||
        (expect_addr && info->si_addr != expect_addr))
        bad_info++;
}

static void jump_out(int sig, siginfo_t *info, void *ctx) {
    (void)sig; (void)ctx;
    check(info);
    siglongjmp(env, 1);
}

static void skip_ud2(int sig, siginfo_t *info, void *ctx) {
    (void)sig;
    check(info);
    ((ucontext_t *)ctx)->uc_mcontext.gregs[REG_RIP] += 2;
}

static void just_return(int sig, siginfo_t *info, void *ctx) {
    (void)sig; (void)ctx;
    check(info);
}

static int install(int sig, void (*h)(int, siginfo_t *, void *), int flags) {
    struct sigaction a, back;
    memset(&a, 0, sizeof a);
    a.sa_sigaction = h;
    a.sa_flags = SA_SIGINFO | flags;
    sigemptyset(&a.sa_mask);
    sigaddset(&a.sa_mask, SIGUSR1);
    if (sigaction(sig, &a, NULL) != 0 || sigaction(sig, NULL, &back) != 0) return 0;
    int same_mask = 1;
    for (int s = 1; s < 65; s++)
        if (sigismember(&a.sa_mask, s) != sigismember(&back.sa_mask, s)) same_mask = 0;
    return same_mask && back.sa_sigaction == h &&
           (back.sa_flags & ~SA_RESTORER) == ((SA_SIGINFO | flags) & ~SA_RESTORER);
}

static volatile int zero;

/* Raises one fault of `kind`. */
static void fault(int kind, char *ro, char *beyond) {
    switch (kind) {
    case 0: *(volatile char *)ro = 1; break;
    case 1: (void)*(volatile char *)beyond; break;
    case 2: __asm__ volatile("ud2"); break;
    case 3: __asm__ volatile("int3"); break;
    case 4: __asm__ volatile("xor %%edx, %%edx; mov $1, %%eax; idivl %0" ::"r"(zero) : "eax", "edx"); break;
    case 5: abort();
    }
}

int main(void) {
    static const struct { const char *name; int sig, flags, code, jumps; } kinds[] = {
        {"SIGSEGV on an alternate stack, siglongjmp", SIGSEGV, SA_ONSTACK, SEGV_ACCERR, 1},
        {"SIGBUS with SA_NODEFER, siglongjmp", SIGBUS, SA_NODEFER, BUS_ADRERR, 1},
        {"SIGILL, handler skips the instruction", SIGILL, 0, ILL_ILLOPN, 0},
        {"SIGTRAP, handler returns", SIGTRAP, 0, 0, 0},
        {"SIGFPE, siglongjmp", SIGFPE, 0, FPE_INTDIV, 1},
        {"SIGABRT with SA_RESETHAND, siglongjmp", SIGABRT, SA_RESETHAND, 0, 1},
    };
    long page = sysconf(_SC_PAGESIZE);
    char *altstack = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    stack_t ss = {.ss_sp = altstack, .ss_size = 8192, .ss_flags = 0};
    char *ro = mmap(NULL, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    FILE *f = tmpfile();
    char *beyond = NULL;
    if (f && ftruncate(fileno(f), page) == 0) {
        char *m = mmap(NULL, 2 * page, PROT_READ, MAP_SHARED, fileno(f), 0);
        if (m != MAP_FAILED) beyond = m + page;
    }
    if (altstack == MAP_FAILED || ro == MAP_FAILED || !beyond || sigaltstack(&ss, NULL) != 0) {
        puts("setup failed");
        return 2;
    }
    int ok = 1;
    for (int k = 0; k < 6; k++) {
        handled = bad_info = 0;
        expect_signo = kinds[k].sig;
        expect_code = kinds[k].code;
        expect_addr = k == 0 ? ro : k == 1 ? beyond : NULL;
        void (*h)(int, siginfo_t *, void *) =
            kinds[k].jumps ? jump_out : k == 2 ? skip_ud2 : just_return;
        int reported = install(kinds[k].sig, h, kinds[k].flags);
        long raised = 0;
        double start = cpu_seconds();
        while (cpu_seconds() - start < 0.25) {
            if (kinds[k].flags & SA_RESETHAND) install(kinds[k].sig, h, kinds[k].flags);
            if (kinds[k].jumps && sigsetjmp(env, 1) != 0) continue;
            raised++;
            fault(k, ro, beyond);
        }
        /* A jump lands before `raised` counts the next one. */
        int all = kinds[k].jumps ? handled == raised || handled == raised - 1 : handled == raised;
        int good = reported && all && handled > 100 && bad_info == 0;
        ok &= good;
        printf("%s: %s\n", kinds[k].name, good ? "handled as asked" : "NOT as asked");
        if (!good)
            fprintf(stderr, "%s: reported %d, raised %ld, handled %ld, bad siginfo %ld\n",
                    kinds[k].name, reported, raised, (long)handled, (long)bad_info);
    }
    return ok ? 0 : 1;
}
