"""py_hot.py [SECONDS]: two Python functions burn the process's CPU time in
a 70/30 split (hot_a 70%, hot_b 30%), interleaved in ten rounds, measured
on the thread's own CPU clock. Prints the CPU seconds each one took."""

import sys
import time


def hot_a(seconds):
    end = time.thread_time() + seconds
    x = 0
    while time.thread_time() < end:
        for i in range(500):
            x += i * i
    return x


def hot_b(seconds):
    end = time.thread_time() + seconds
    x = 0
    while time.thread_time() < end:
        for i in range(500):
            x ^= i * 3
    return x


def main():
    total = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    spent = {"hot_a": 0.0, "hot_b": 0.0}
    for _ in range(10):
        for f, share in ((hot_a, 0.7), (hot_b, 0.3)):
            t0 = time.thread_time()
            f(total * share / 10)
            spent[f.__name__] += time.thread_time() - t0
    print(" ".join(f"{k}={v:.3f}" for k, v in sorted(spent.items())))


if __name__ == "__main__":
    main()
