"""What a Python annotation costs: ``python python/bench_annotate.py`` (not
under strobe: the no-op cost) and ``strobe sample -q -- python
python/bench_annotate.py`` (recorded). Batches of 2000 after a 5 ms pause
(the collector empties the thread's ring meanwhile, so this is the
producer's own cost), best of 50 batches, nanoseconds per operation."""

import time

import strobe

BATCH = 2000


def best(body):
    out = float("inf")
    for _ in range(50):
        time.sleep(0.005)
        t0 = time.perf_counter_ns()
        body()
        out = min(out, (time.perf_counter_ns() - t0) / BATCH)
    return out


def loop_only():
    for _ in range(BATCH):
        pass


def with_region():
    for _ in range(BATCH):
        with strobe.region("bench"):
            pass


REUSED = strobe.region("bench")


def with_reused_region():
    for _ in range(BATCH):
        with REUSED:
            pass


@strobe.traced
def f():
    pass


def traced_call():
    for _ in range(BATCH):
        f()


def plain_call():
    def g():
        pass

    for _ in range(BATCH):
        g()


def mark():
    for _ in range(BATCH):
        strobe.mark("bench")


base = best(loop_only)
print(f"under strobe: {strobe.is_active()}; loop overhead {base:.1f} ns (subtracted)")
for name, body in [
    ("with strobe.region(name)", with_region),
    ("with a reused region", with_reused_region),
    ("call of a @strobe.traced function", traced_call),
    ("call of a plain function", plain_call),
    ("strobe.mark(name)", mark),
]:
    print(f"{name}: {best(body) - base:.1f} ns")
