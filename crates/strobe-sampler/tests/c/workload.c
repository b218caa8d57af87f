/* Workloads for the sampler tests: built with -O2 -fomit-frame-pointer as a
 * shared library, so unwinding needs CFI and crosses a library boundary. */
#include <stdint.h>
#include <time.h>

static uint64_t thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) double work_a(long iters) {
    double x = 1.0;
    for (long i = 0; i < iters; i++) x = x * 1.0000001 + 0.5 / (x + (double)i);
    return x;
}

__attribute__((noinline)) double work_b(long iters) {
    double x = 2.0;
    for (long i = 0; i < iters; i++) x = x * 0.9999999 + 0.25 / (x + (double)i);
    return x;
}

volatile double workload_sink;

/* Spends total_ms of this thread's CPU time in work_a and work_b, share_a of
 * it in work_a. Reports the CPU time really spent in each. Chunk lengths are
 * random: a strictly periodic pattern would alias with the periodic timer
 * (for any sampling profiler) and bias the shares. */
__attribute__((noinline)) void run_split(double total_ms, double share_a,
                                         uint64_t *ns_a, uint64_t *ns_b) {
    uint64_t ta = 0, tb = 0, total = (uint64_t)(total_ms * 1e6);
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    while (ta + tb < total) {
        int pick_a = (double)ta < share_a * (double)(ta + tb + 1);
        rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
        long iters = 5000 + (long)(rng % 40000);
        uint64_t t0 = thread_cpu_ns();
        workload_sink += pick_a ? work_a(iters) : work_b(iters);
        uint64_t t1 = thread_cpu_ns();
        if (pick_a) ta += t1 - t0; else tb += t1 - t0;
    }
    *ns_a = ta;
    *ns_b = tb;
}

__attribute__((noinline)) double spin_ms(double ms) {
    uint64_t end = thread_cpu_ns() + (uint64_t)(ms * 1e6);
    double x = 0;
    while (thread_cpu_ns() < end) x += work_a(5000);
    return x;
}

/* A real recursion: each level keeps a frame alive across the call. */
__attribute__((noinline)) double recurse(int depth, double ms) {
    volatile char frame[32];
    frame[depth & 31] = (char)depth;
    double r = depth == 0 ? spin_ms(ms) : recurse(depth - 1, ms);
    __asm__ volatile("" : : "r"(frame) : "memory");
    return r + frame[depth & 31];
}
