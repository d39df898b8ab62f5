#!/usr/bin/env python3
"""multiprocessing's side of pool_bench's pool_imap_rate: items a second through Pool(2).map and
Pool(2).imap over the same 200,000 integers (identity), imap at its default chunksize (1) and at
1000. Median of 3, after a warm-up. One line per form, as bench/compare/run.sh's imap part reads it:

    mp map chunksize=default items_per_s=...
"""
import multiprocessing
import statistics
import time

N = 200_000


def identity(x):
    return x


def rate(run):
    run()  # warm-up
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        total = run()
        times.append(time.perf_counter() - t0)
        assert total == (N - 1) * N // 2
    return N / statistics.median(times)


def main():
    xs = range(N)
    with multiprocessing.get_context("fork").Pool(2) as pool:
        forms = [
            ("map", "default", lambda: sum(pool.map(identity, xs))),
            ("imap", "default", lambda: sum(pool.imap(identity, xs))),
            ("imap", "1000", lambda: sum(pool.imap(identity, xs, chunksize=1000))),
        ]
        for form, chunk, run in forms:
            print(f"mp {form} chunksize={chunk} items_per_s={rate(run):.0f}", flush=True)


if __name__ == "__main__":
    main()
