#!/usr/bin/env python3
"""The peers on fiber's pool workloads: Python's multiprocessing, loky, Dask and Ray.

Run by bench/compare/run.sh peers, in the peers' virtual environment; each peer runs in a fresh
interpreter of its own (--peer NAME), and every process a peer started is stopped by pid at the
end (Ray and Dask start their own). Workloads, as fiber's pool_bench computes them:
  overhead   per task at chunksize 1 (or the peer's one-task-per-call form), D in {0, 1 ms},
             W in {2, 4}, N = 5000: (wall - N x D_measured / W) / N
  throughput 100,000 trivial tasks, default chunks (multiprocessing's: N / (4W) per chunk;
             Dask has no chunks: a bag of 4W partitions, its natural bulk form)
  latency    one task's round trip on a warm pool (submit, wait for the result)
Prints one line per figure: `peer workload key=value ...`.
"""
import argparse
import os
import signal
import statistics
import subprocess
import sys
import time

now = time.perf_counter


def sleep_task(d):
    if d:
        time.sleep(d)
    return d


def trivial(x):
    return x


def measured_sleep(d, n=300):
    if not d:
        return 0.0
    t = now()
    for _ in range(n):
        time.sleep(d)
    return (now() - t) / n


class mp_peer:
    def __init__(self, w):
        import multiprocessing
        self.pool = multiprocessing.get_context().Pool(w)
        self.pool.map(sleep_task, [0.001] * (w * 20), chunksize=1)

    def map1(self, xs):
        return self.pool.map(sleep_task, xs, chunksize=1)

    def bulk(self, xs, w):
        return self.pool.map(trivial, xs)

    def one(self):
        return self.pool.apply(trivial, (1,))

    def close(self):
        self.pool.close()
        self.pool.join()


class loky_peer:
    def __init__(self, w):
        from loky import get_reusable_executor
        self.ex = get_reusable_executor(max_workers=w)
        list(self.ex.map(sleep_task, [0.001] * (w * 20), chunksize=1))

    def map1(self, xs):
        return list(self.ex.map(sleep_task, xs, chunksize=1))

    def bulk(self, xs, w):
        return list(self.ex.map(trivial, xs, chunksize=max(1, -(-len(xs) // (4 * w)))))

    def one(self):
        return self.ex.submit(trivial, 1).result()

    def close(self):
        self.ex.shutdown(wait=True, kill_workers=True)


class dask_peer:
    def __init__(self, w):
        from distributed import Client, LocalCluster
        self.cluster = LocalCluster(n_workers=w, threads_per_worker=1, processes=True, dashboard_address=None)
        self.client = Client(self.cluster)
        self.client.gather(self.client.map(sleep_task, [0.001] * (w * 20), pure=False))

    def map1(self, xs):
        return self.client.gather(self.client.map(sleep_task, xs, pure=False))

    def bulk(self, xs, w):
        import dask.bag as db
        return db.from_sequence(xs, npartitions=4 * w).map(trivial).compute(scheduler=self.client.get)

    def one(self):
        return self.client.submit(trivial, 1, pure=False).result()

    def close(self):
        self.client.close()
        self.cluster.close()


class ray_peer:
    def __init__(self, w):
        import ray
        self.ray = ray
        ray.init(num_cpus=w, include_dashboard=False, log_to_driver=False, configure_logging=False)
        self.task = ray.remote(sleep_task)
        self.trivial = ray.remote(trivial)
        from ray.util.multiprocessing import Pool
        self.pool = Pool(w)
        ray.get([self.task.remote(0.001) for _ in range(w * 20)])
        self.pool.map(sleep_task, [0.001] * (w * 20), chunksize=1)

    def map1(self, xs):  # plain tasks: Ray's natural form
        return self.ray.get([self.task.remote(x) for x in xs])

    def map1_pool(self, xs):
        return self.pool.map(sleep_task, xs, chunksize=1)

    def bulk(self, xs, w):
        return self.pool.map(trivial, xs)

    def one(self):
        return self.ray.get(self.trivial.remote(1))

    def close(self):
        self.pool.close()
        self.ray.shutdown()


PEERS = {"mp": mp_peer, "loky": loky_peer, "dask": dask_peer, "ray": ray_peer}


def emit(peer, workload, **kv):
    print(peer, workload, " ".join("%s=%s" % (k, v) for k, v in kv.items()), flush=True)


def run_peer(name, repeat):
    cal = {d: measured_sleep(d) for d in (0.0, 0.001)}
    for w in (2, 4):
        p = PEERS[name](w)
        forms = [("", p.map1)] + ([("_pool", p.map1_pool)] if hasattr(p, "map1_pool") else [])
        for suffix, map1 in forms:
            for d in (0.0, 0.001):
                n = 5000
                walls = []
                for _ in range(repeat):
                    t = now()
                    r = map1([d] * n)
                    walls.append(now() - t)
                    assert len(r) == n
                wall = statistics.median(walls)
                emit(name + suffix, "overhead", W=w, D_us=int(d * 1e6), ovh_cal_us="%.1f" % ((wall - n * cal[d] / w) / n * 1e6))
        xs = list(range(100000))
        walls = []
        for _ in range(repeat):
            t = now()
            r = p.bulk(xs, w)
            walls.append(now() - t)
            assert list(r)[-1] == 99999
        emit(name, "throughput", W=w, tasks_per_s="%.0f" % (len(xs) / statistics.median(walls)))
        lat = []
        for _ in range(200):
            t = now()
            p.one()
            lat.append(now() - t)
        emit(name, "latency", W=w, us="%.1f" % (statistics.median(lat) * 1e6))
        p.close()


def descendants(root):
    kids = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(pid))
    out, todo = [], [root]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peers", default="mp,loky,dask,ray")
    ap.add_argument("--peer", help=argparse.SUPPRESS)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if args.peer:
        run_peer(args.peer, args.repeat)
        return
    for name in args.peers.split(","):
        # A session of its own: every process the peer starts (Ray's raylet and GCS, Dask's
        # nanny and workers, loky's and multiprocessing's workers) is found and stopped by pid,
        # even one that left its parent.
        child = subprocess.Popen([sys.executable, __file__, "--peer", name, "--repeat", str(args.repeat)],
                                 start_new_session=True)
        child.wait()
        left = [int(p) for p in os.listdir("/proc") if p.isdigit() and _session_of(int(p)) == child.pid]
        left += descendants(child.pid)
        for pid in sorted(set(left)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if left:
            print("# %s left %d process(es) running; stopped by pid: %s" % (name, len(set(left)), sorted(set(left))),
                  file=sys.stderr)
        if child.returncode:
            print("# %s failed (exit %d)" % (name, child.returncode), file=sys.stderr)


def _session_of(pid):
    try:
        return os.getsid(pid)
    except OSError:
        return None


if __name__ == "__main__":
    main()
