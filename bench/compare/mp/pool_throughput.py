#!/usr/bin/env python3
"""multiprocessing's Pool.map throughput: a trivial function over --n integers.

For W in 2 and 4 workers, one pool each, warmed up, then map at multiprocessing's default
chunksize (N / (4 W)) and at 1000, --repeat times; tasks a second from the median. One line each:

    pool_throughput  lib=mp(fork) W=4 N=100000 chunksize=default wall=0.012s tasks_per_s=8300000
"""
import multiprocessing

import timing


def increment(x):
    return x + 1


def measure(context, workers, n, repeat):
    xs = list(range(n))
    expected = sum(xs) + n
    with context.Pool(workers) as pool:
        pool.map(increment, range(100 * workers), chunksize=1)
        for chunksize in (None, 1000):
            walls = []
            for _ in range(repeat):
                began = timing.clock()
                assert sum(pool.map(increment, xs, chunksize=chunksize)) == expected
                walls.append(timing.clock() - began)
            wall = timing.median(walls)
            timing.emit("pool_throughput", context.get_start_method(), W=workers, N=n,
                        chunksize=chunksize or "default", wall=f"{wall:.3f}s", tasks_per_s=f"{n / wall:.0f}")


if __name__ == "__main__":
    args = timing.arguments(__doc__, n=100000)
    for workers in (2, 4):
        measure(multiprocessing.get_context("fork"), workers, args.n, args.repeat)
