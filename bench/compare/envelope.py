#!/usr/bin/env python3
"""The envelope of one master: what bounds it at 10,000 workers on 100 hosts, from the per-unit
costs build/bench/envelope_bench measured here (docs/design.md, "The envelope of one master").

    envelope.py direct.json curve.json [slurm-zeromq.json slurm-direct.json slurm-hub.json [slurm-fork.json]]

direct.json: envelope_bench on the local backend (direct links); curve.json: the same with
FIBER_ENCRYPTION=always FIBER_LOCAL_TRANSPORT=zeromq (every message through ZeroMQ with CURVE, as
across a network); slurm.json: under FIBER_BACKEND=slurm (TCP with CURVE to the test cluster's
nodes, FIBER_REMOTE_TRANSPORT=zeromq); slurm-direct.json: the same with FIBER_REMOTE_TRANSPORT=direct (TCP with TLS 1.3 on
direct links, no I/O thread); slurm-hub.json: with FIBER_REMOTE_TRANSPORT=hub (one hub per node, one TLS link each to
the master); slurm-fork.json: the same with FIBER_HUB_WORKERS=fork (each hub forks its node's workers).
The model: the master is one loop thread; each task costs it
`master_cpu_us_per_task` (measured at 1,024 workers); each worker costs it `fds_per_worker`
descriptors and `master_kB_per_worker` of memory; an ES generation moves a model of `model_mb`
to every worker by the way the program passes it.
"""
import json
import sys

WORKERS, HOSTS, MODEL_MB, CHUNKS_PER_WORKER, NIC_GBIT = 10_000, 100, 100, 4, 10


def figures(path):
    rows = json.load(open(path))["benchmarks"]
    return {int(b["run_name"].split("W:")[1].split("/")[0]): b for b in rows}


def main():
    direct, curve = figures(sys.argv[1]), figures(sys.argv[2])
    remote = {}
    if len(sys.argv) > 5:
        for name, path in zip(("ZeroMQ + CURVE", "direct links + TLS", "host hubs", "host hubs forking the workers"),
                              sys.argv[3:7]):
            remote[name] = figures(path)
    big = max(direct)
    d, c = direct[big], curve[big]
    print(f"measured at {big} workers on this host (direct links / ZeroMQ with CURVE):")
    for key, unit in (("fds_per_worker", ""), ("master_kB_per_worker", " kB"), ("worker_pss_kB", " kB"),
                      ("master_cpu_us_per_task", " us"), ("wall_us_per_task", " us")):
        print(f"  {key:24s} {d[key]:8.2f}{unit} / {c[key]:8.2f}{unit}")
    for name, runs in remote.items():
        for w, b in sorted(runs.items()):
            line = (f"  slurm, {w} workers, {name}: master {b['master_cpu_us_per_task']:.2f} us CPU and"
                    f" {b['wall_us_per_task']:.2f} us wall per task, {b['fds_per_worker']:.3f} fds and"
                    f" {b['master_kB_per_worker']:.0f} kB per worker")
            if w in direct:
                line += (f"; / this host's direct links: CPU {b['master_cpu_us_per_task'] / direct[w]['master_cpu_us_per_task']:.2f},"
                         f" wall {b['wall_us_per_task'] / direct[w]['wall_us_per_task']:.2f}")
            print(line)

    # Remote workers cost what the Slurm run measured when it had hundreds of them (a cluster
    # started with FIBER_SLURM_NODE_CPUS=513 holds 1,024), through host hubs; else what ZeroMQ
    # with CURVE costs here.
    hubs = remote.get("host hubs", {})
    if hubs and max(hubs) >= 256:
        c, source = hubs[max(hubs)], f"Slurm, {max(hubs)} workers through host hubs"
    else:
        source = f"ZeroMQ with CURVE on this host, {big} workers"
    print(f"\nthe envelope at {WORKERS:,} workers on {HOSTS} hosts (remote workers as measured: {source}):")
    fds = WORKERS * c["fds_per_worker"] + 64
    print(f"  file descriptors in the master   {fds:,.0f}" + (": above the common soft limit of 1,024 and of many"
          " hard limits of 4,096; fiber warns with the fix (ulimit -n) when a pool would pass it" if fds > 1024 else
          " (one link per host)"))
    print(f"  master memory for its workers    {WORKERS * c['master_kB_per_worker'] / 1024:,.0f} MB")
    cpu = c["master_cpu_us_per_task"]
    rate = 1e6 / cpu
    print(f"  master CPU per task              {cpu:.1f} us: at most {rate:,.0f} tasks/s at chunksize 1, so"
          f" {WORKERS:,} workers stay busy only with tasks of {WORKERS / rate * 1e3:,.0f} ms or more"
          f" (chunksize k divides that by about k)")
    model = MODEL_MB * 1e6
    nic = NIC_GBIT * 1e9 / 8
    ways = (
        ("every task holds a reference (once per chunk)", WORKERS * CHUNKS_PER_WORKER),
        ("fiber::shared, one copy per worker", WORKERS),
        ("fiber::shared, one copy per host from the master", HOSTS),
        ("fiber::shared as it is: two from the master, hosts forward the rest", 2),
    )
    print(f"  bytes leaving the master per ES generation, a {MODEL_MB} MB model, {NIC_GBIT} Gbit/s:")
    for label, copies in ways:
        print(f"    {label:58s} {copies * model / 1e9:10,.1f} GB  {copies * model / nic:10,.1f} s")


if __name__ == "__main__":
    main()
