#!/usr/bin/env python3
"""multiprocessing's Pool.map overhead per task: tasks that sleep D, one task a chunk.

For W in 2 and 4 workers, one pool each, started and warmed up (every worker has run tasks), then
Pool(W).map(sleep, [D] * N, chunksize=1) for D = 0 (N = 5000), 1 ms (N = 5000) and 10 ms (N = 500),
--repeat times; the median wall time against the ideal N * D / W. The calibrated ideal uses what
time.sleep(D) really takes on this machine (it overshoots by tens of microseconds):

    ovh/task     = (wall - N * D / W) / N
    ovh_cal/task = (wall - N * slept(D) / W) / N

One task a chunk because a larger chunk hides the per-task cost. One line a (W, D):

    pool_overhead    lib=mp(fork) W=4 D=1ms N=5000 wall=1.46s ideal=1.25s ideal_cal=1.33s ovh/task=42.0us ovh_cal/task=26.0us pool_start+warmup=0.030s
"""
import multiprocessing
import time

import timing

LOADS = ((0.0, 5000), (0.001, 5000), (0.010, 500))


def sleep(d):
    if d:
        time.sleep(d)
    return d


def slept(d, times=300):
    if not d:
        return 0.0
    began = timing.clock()
    for _ in range(times):
        time.sleep(d)
    return (timing.clock() - began) / times


def measure(context, workers, calibrated, repeat):
    began = timing.clock()
    with context.Pool(workers) as pool:
        pool.map(sleep, [0.001] * (20 * workers), chunksize=1)
        started = timing.clock() - began
        for d, n in LOADS:
            walls = []
            for _ in range(repeat):
                began = timing.clock()
                assert len(pool.map(sleep, [d] * n, chunksize=1)) == n
                walls.append(timing.clock() - began)
            wall, ideal, ideal_cal = timing.median(walls), n * d / workers, n * calibrated[d] / workers
            timing.emit("pool_overhead", context.get_start_method(), W=workers, D=f"{d * 1e3:g}ms", N=n,
                        wall=f"{wall:.3f}s", ideal=f"{ideal:.3f}s", ideal_cal=f"{ideal_cal:.3f}s",
                        **{"ovh/task": f"{(wall - ideal) / n * 1e6:.1f}us",
                           "ovh_cal/task": f"{(wall - ideal_cal) / n * 1e6:.1f}us",
                           "pool_start+warmup": f"{started:.3f}s"})


if __name__ == "__main__":
    args = timing.arguments(__doc__)
    calibrated = {d: slept(d) for d, _ in LOADS}
    for workers in (2, 4):
        measure(multiprocessing.get_context("fork"), workers, calibrated, args.repeat)
