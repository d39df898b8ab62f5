#!/usr/bin/env python3
"""multiprocessing's start+join of one child that does nothing, one child after another.

For each start method (fork, spawn, forkserver), in a fresh interpreter of its own so that one
method's warm state does not help the next: one child first (reported as `first`: it pays for the
forkserver's own start), then --n children timed one by one. One line a method:

    process_start    lib=mp(fork) n=20 mean=1.9ms median=1.8ms min=1.6ms first=2.4ms
"""
import multiprocessing
import subprocess
import sys

import timing


def nothing():
    pass


def start_join(context):
    began = timing.clock()
    child = context.Process(target=nothing)
    child.start()
    child.join()
    if child.exitcode != 0:
        sys.exit(f"a {context.get_start_method()} child exited with {child.exitcode}")
    return timing.clock() - began


def measure(method, n):
    context = multiprocessing.get_context(method)
    first = start_join(context)
    times = [start_join(context) for _ in range(n)]
    ms = lambda s: f"{s * 1e3:.1f}ms"
    timing.emit("process_start", method, n=n, mean=ms(sum(times) / n), median=ms(timing.median(times)),
                min=ms(min(times)), first=ms(first))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--one":
        measure(sys.argv[2], int(sys.argv[3]))
        sys.exit(0)
    args = timing.arguments(__doc__, n=20)
    for method in ("fork", "spawn", "forkserver"):
        subprocess.run([sys.executable, __file__, "--one", method, str(args.n)], check=True)
