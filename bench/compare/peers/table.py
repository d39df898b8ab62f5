#!/usr/bin/env python3
"""The lead table of docs/performance.md, from one `bench/compare/run.sh peers` run.

Reads, for each round R (1: fiber first, 2: the peers first), from the folder given:
  fiber-R-*.json   fiber's Google Benchmark output (medians of repetitions)
  peers-R.txt      bench/compare/peers/peers.py's lines: `peer workload key=value ...`
  floor-R.txt      the machine's floors: wakeup_floor (a round trip over a bare socketpair, what
                   fiber's queues and pipes travel on, whose reader polls 50 µs before it sleeps,
                   as fiber's threads do) and framework_floor
Every figure is turned into a time (lower is better), so that every cell, fiber ÷ peer, reads
the same way: below 1, fiber is faster. A cell holds round 1 / round 2.
"""
import glob
import json
import re
import sys

PEERS = [("mp", "multiprocessing"), ("seed", "uber/fiber"), ("ray", "Ray"), ("dask", "Dask"), ("loky", "loky")]


def load(folder, rnd):
    fiber = {}
    for path in glob.glob(f"{folder}/fiber-{rnd}-*.json"):
        for b in json.load(open(path))["benchmarks"]:
            if b.get("aggregate_name") == "median":
                fiber[b["run_name"]] = b
    peers = []
    for line in open(f"{folder}/peers-{rnd}.txt"):
        parts = line.split()
        if len(parts) < 3 or "=" not in parts[2]:
            continue
        peers.append((parts[0], parts[1], dict(p.split("=", 1) for p in parts[2:])))
    floor = open(f"{folder}/floor-{rnd}.txt").read()
    return fiber, peers, floor


def fiber_figure(fiber, prefix, key="real_time"):
    for name, b in fiber.items():
        if name.startswith(prefix):
            return b[key]
    return None


def peer_figure(peers, peer, workload, key, **match):
    for p, w, kv in peers:
        if p == peer and w == workload and all(kv.get(k) == str(v) for k, v in match.items()) and key in kv:
            return float(kv[key])
    return None


def peer_error(peers, peer, workload):
    for p, w, kv in peers:
        if p == peer and w == workload and "error" in kv:
            return kv["error"]
    return None


# Each row: label, unit, fiber's figure (from its json, and the round's peers' lines), each
# peer's figure in the same unit, the floor's.
def rows(fiber, peers, floor):
    f = lambda *a, **k: fiber_figure(fiber, *a, **k)
    p = lambda *a, **k: peer_figure(peers, *a, **k)
    fl = lambda pattern: (float(m.group(1)) if (m := re.search(pattern, floor)) else None)
    out = []
    out.append(("a new process: start+join (Ray: an actor, created and its first call answered)", "ms",
                f("process_start_join"),
                {"mp": p("mp", "start", "ms"), "seed": p("seed", "start", "ms"), "ray": p("ray_actor", "start", "ms")},
                None, "start"))
    apply2 = f("pool_apply_latency/W:2/")
    out.append(("a task on a running worker (fiber: a warm pool of 2; Ray: a task; Dask: a submit)", "ms",
                apply2 / 1e3 if apply2 else None,
                {"ray": p("ray", "start", "ms"), "dask": p("dask", "start", "ms")}, None, "start"))
    out.append(("16 B round trip, queue (Ray: actor call; Dask: future)", "µs", f("simple_queue_rtt_16B"),
                {"mp": p("mp", "rtt", "us", channel="SimpleQueue"), "seed": p("seed", "rtt", "us", channel="SimpleQueue"),
                 "ray": p("ray", "rtt", "us", channel="actor"), "dask": p("dask", "rtt", "us", channel="future")},
                fl(r"socketpair spin 50us rtt ([\d.]+)"), "rtt"))
    out.append(("16 B round trip, pipe", "µs", f("pipe_rtt_16B"),
                {"mp": p("mp", "rtt", "us", channel="Pipe"), "seed": p("seed", "rtt", "us", channel="Pipe")},
                fl(r"socketpair spin 50us rtt ([\d.]+)"), "rtt"))
    for w in (2, 4):
        for d in (0, 1000):
            out.append((f"pool overhead per task, chunksize 1, {d // 1000} ms tasks, {w} workers", "µs",
                        f(f"pool_overhead/W:{w}/D_us:{d}/", "ovh_cal_us"),
                        {n: p(n, "overhead", "ovh_cal_us", W=w, D_us=d) for n, _ in PEERS}, None, "pool"))
    for w in (2, 4):
        tput = f(f"pool_throughput/W:{w}/chunksize:0/", "tasks_per_s")
        per = lambda r: 1e9 / r if r else None
        out.append((f"pool throughput, 100,000 trivial tasks, {w} workers (Ray: its Pool)", "ns/task", per(tput),
                    {n: per(p("ray_pool" if n == "ray" else n, "throughput", "tasks_per_s", W=w)) for n, _ in PEERS}, None,
                    "pool"))
    for w in (2, 4):
        out.append((f"one task's round trip on a warm pool, {w} workers", "µs", f(f"pool_apply_latency/W:{w}/"),
                    {n: p(n, "latency", "us", W=w) for n, _ in PEERS}, None, "pool"))
    out.append(("framework test (5 workers, rounds of 5 × 1 ms): wall ÷ ideal", "×",
                f("framework_rounds/", "ratio_to_ideal"),
                {n: p(n, "framework", "ratio_to_ideal") for n, _ in PEERS},
                fl(r"framework floor D_us=1000 median ratio_to_ideal=([\d.]+)"), "framework"))
    es = {n: p(n, "es", "ms_per_generation") for n, _ in PEERS}
    out.append(("ES generation: 256 tasks × (10,000 doubles, seed), 4 workers; fiber's tasks hold a const reference",
                "ms", f("es_round_refs/"), es, None, "es"))
    out.append(("the same, fiber's tasks holding a shared_ptr", "ms", f("es_round/"), es, None, "es"))
    out.append(("the same, fiber's tasks holding a fiber::shared (each worker gets it once)", "ms", f("es_round_shared/"), es,
                None, "es"))
    out.append(("managers, sync: 4 CartPoles × 200 steps of 1 ms", "s", (f("harness_sync/") or 0) / 1e3 or None,
                {"mp": p("mp", "managers", "steps_s", mode="sync"), "seed": p("seed", "managers", "steps_s", mode="sync")},
                None, "managers"))
    out.append(("managers, async (Ray, Dask: actors)", "s", (f("harness_async/") or 0) / 1e3 or None,
                {"seed": p("seed", "managers", "steps_s", mode="async"), "ray": p("ray", "managers", "steps_s"),
                 "dask": p("dask", "managers", "steps_s")}, None, "managers"))
    mbps = f("payload_8MB/", "bytes_per_second")
    per_map = lambda mb_per_s: 64 * 8 / mb_per_s if mb_per_s else None  # s per map of 64 × 8 MB
    out.append(("64 × 8 MB arguments, 4 workers", "s", per_map(mbps / 1e6 if mbps else None),
                {n: per_map(p(n, "payload", "MB_per_s")) for n, _ in PEERS}, None, "payload"))
    given = f("payload_8MB_given/", "bytes_per_second")
    out.append(("the same, fiber's items given to the map (std::move)", "s", per_map(given / 1e6 if given else None),
                {n: per_map(p(n, "payload", "MB_per_s")) for n, _ in PEERS}, None, "payload"))
    ready = {n: p(n, "ready", "s") for n, _ in PEERS}
    out.append(("256 workers ready: each has run a task (median of 3 pools)", "s",
                (f("pool_ready_ran_a_task/W:256/") or 0) / 1e3 or None,
                {n: v for n, v in ready.items() if n not in ("ray", "dask")}, None, "ready"))
    out.append(("32 workers ready: each has run a task (Ray and Dask cannot start 256 here)", "s",
                (f("pool_ready_ran_a_task/W:32/") or 0) / 1e3 or None,
                {n: v for n, v in ready.items() if n in ("ray", "dask")}, None, "ready"))
    return out


def program_rows(fiber, peers, floor):
    """A program end to end: fiber's C++ binary beside each peer's Python program, interpreter and
    imports included. Not a library's figure: a table of its own."""
    return [("pi, 1,000,000 samples, 4 workers, the program end to end", "s", None,
             {n: peer_figure(peers, n, "pi", "s") for n, _ in PEERS}, None, "pi")]


def fmt(x):
    if x is None:
        return "-"
    if x >= 100:
        return "%.0f" % x
    if x >= 10:
        return "%.1f" % x
    if x >= 0.1:
        return "%.2f" % x
    if x >= 0.001:
        return "%.3f" % x
    return "%.1e" % x


def print_table(rounds, tables):
    joined = lambda parts: " / ".join(parts) if any(x != "-" for x in parts) else "-"
    print("| workload | unit | fiber | " + " | ".join(f"÷ {label}" for _, label in PEERS) + " | ÷ floor |")
    print("|---|---|---|" + "---|" * (len(PEERS) + 1))
    for i, (label, unit, _, _, _, workload) in enumerate(tables[0]):
        # fiber's figure in round r; its pi example ran beside each peer's program, by turns.
        mine = lambda r, name=None: (peer_figure(rounds[r][1], "fiber_beside_" + (name or "mp"), "pi", "s")
                                     if workload == "pi" else tables[r][i][2])
        cells = []
        for name, _ in PEERS:
            parts = []
            for r in (0, 1):
                theirs = tables[r][i][3].get(name)
                if mine(r, name) is not None and theirs is not None:
                    parts.append(fmt(mine(r, name) / theirs))
                else:
                    parts.append("fails" if name in tables[r][i][3] and peer_error(rounds[r][1], name, workload) else "-")
            cells.append(joined(parts))
        floors = joined([fmt(mine(r) / tables[r][i][4]) if mine(r) and tables[r][i][4] else "-" for r in (0, 1)])
        print(f"| {label} | {unit} | {joined([fmt(mine(r)) for r in (0, 1)])} | " + " | ".join(cells) + f" | {floors} |")


def main():
    folder = sys.argv[1]
    rounds = [load(folder, r) for r in (1, 2)]
    print_table(rounds, [rows(*r) for r in rounds])
    print()
    print("A program end to end (a C++ binary beside Python interpreters, imports included):")
    print()
    print_table(rounds, [program_rows(*r) for r in rounds])


if __name__ == "__main__":
    main()
