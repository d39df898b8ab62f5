#!/usr/bin/env python3
"""The data path's workloads with multiprocessing, as bench/data_path_bench.cpp runs them with fiber.

es_round:    Pool(4).map of 256 tasks per generation, each a 10,000-double vector (array('d'),
             which pickles as its bytes) and a seed, each returning a float; a generation's time
             includes building its tasks.
model_8MB:   a fresh 1,000,000-double model (array('d')) each map, read by 64 tasks (model, i) on
             Pool(4) in chunks of 4: pickle's memo sends it once per chunk (16 times a map).
payload_8MB: Pool(4).map of 64 tasks of 8 MB each (bytes, multiprocessing's fastest case): MB/s of
             arguments.
"""
import argparse
import time
from array import array
from multiprocessing import get_context


def es_evaluate(task):
    theta, seed = task
    return theta[seed % len(theta)] + seed


def model_probe(task):
    model, i = task
    return model[i]


def model_maps(pool, rounds):
    model = array('d', bytes(8_000_000))
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        model[0] = pool.map(model_probe, [(model, i) for i in range(64)], chunksize=4)[0]
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def payload_sum(v):
    return v[0] + v[-1] + len(v)


def es_round(pool, generations):
    theta = array('d', (float(i) for i in range(10000)))
    times = []
    for g in range(generations):
        t0 = time.perf_counter()
        batch = [(theta, g * 256 + i) for i in range(256)]
        fitness = pool.map(es_evaluate, batch)
        times.append(time.perf_counter() - t0)
        theta[g % 10000] += 1e-3 * fitness[0]
    return sorted(times)[len(times) // 2]


def payload(pool, rounds):
    # bytes, which pickle at memcpy speed: multiprocessing's best case (an array('d') of the same
    # size pickles at ~170 MB/s here)
    payloads = [bytes(8_000_000) for _ in range(64)]
    best = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        pool.map(payload_sum, payloads)
        best.append(time.perf_counter() - t0)
    t = sorted(best)[len(best) // 2]
    return 64 * 8_000_000 / t / 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--start-method", default="fork")
    args = ap.parse_args()
    ctx = get_context(args.start_method)
    with ctx.Pool(4) as pool:
        pool.map(es_evaluate, [(array('d', [0.0]), 0)] * 8)  # warm-up
        for _ in range(args.repeat):
            print(f"es_round W=4 tasks=256 dim=10000 ms_per_generation={es_round(pool, 20) * 1e3:.2f}", flush=True)
        for _ in range(args.repeat):
            print(f"model_8MB W=4 tasks=64 ms_per_map={model_maps(pool, 20) * 1e3:.2f}", flush=True)
        for _ in range(args.repeat):
            print(f"payload_8MB W=4 tasks=64 MB_per_s={payload(pool, 3):.1f}", flush=True)


if __name__ == "__main__":
    main()
