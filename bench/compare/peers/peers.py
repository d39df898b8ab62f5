#!/usr/bin/env python3
"""The seed and the peers on fiber's workloads: uber/fiber, multiprocessing, loky, Dask and Ray.

Run by bench/compare/run.sh peers, in the peers' virtual environment. Each peer runs in a fresh
interpreter of its own, in a session of its own (--peer NAME), and every process it left is
stopped by pid at the end (Ray and Dask start their own). Each workload is written the natural
way in each library, and computed as fiber's benchmark computes it:
  start       start+join of one child process, ms (a Process; a Ray actor, created and its first
              call answered); and, in a row of its own, a task on a running worker (a Ray task, a
              Dask submit) beside fiber's task on a warm pool
  rtt         a 16 B round trip, us (SimpleQueue and Pipe to an echoing child; a Ray actor call;
              a Dask future)
  overhead    per task at chunksize 1 (or the one-task-per-call form), D in {0, 1 ms}, W in
              {2, 4}, N = 5000: (wall - N x D_measured / W) / N
  throughput  100,000 trivial tasks, default chunks (multiprocessing's: N / (4W) per chunk; Dask
              has no chunks: a bag of 4W partitions, its natural bulk form)
  latency     one task's round trip on a warm pool (submit, wait for the result)
  framework   uber/fiber's paper: 5 workers, 200 rounds of 5 x 1 ms tasks, wall / ideal
  es          an evolution-strategies generation on 4 workers: 256 tasks, each the generation's
              10,000-double vector and a seed, ms per generation (pickle shares the one vector
              within a chunk; Ray puts it once, Dask scatters it once, per generation)
  managers    4 CartPole environments x 200 steps of 1 ms behind managers: steps time, s (sync:
              each step calls the 4 one after the other; async: the 4 calls go together)
  payload     64 tasks of 8 MB on 4 workers, MB/s of arguments
  ready       from creating a pool of W workers until every worker has run a task, s (median of 3)
  pi          the pi estimation of uber/fiber's README (1,000,000 samples, 4 workers), end to
              end as a program: interpreter, imports and all, s
Prints one line per figure: `peer workload key=value ...`.
"""
import argparse
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from array import array

now = time.perf_counter
SMALL = b"ping-0123456789!"  # 16 bytes


# ---- the tasks (module level, so that every library can send them by reference) ----

def sleep_task(d):
    if d:
        time.sleep(d)
    return d


def trivial(x):
    return x


def noop():
    return None


def echo(x):
    return x


def es_evaluate(task):
    theta, seed = task
    return theta[seed % len(theta)] + seed


def es_evaluate2(theta, seed):
    return theta[seed % len(theta)] + seed


def payload_sum(v):
    return v[0] + v[-1] + len(v)


def sleepy_pid(_):
    time.sleep(0.01)
    return os.getpid()


def inside(p):
    x, y = random.random(), random.random()
    return x * x + y * y < 1


def measured_sleep(d, n=300):
    if not d:
        return 0.0
    t = now()
    for _ in range(n):
        time.sleep(d)
    return (now() - t) / n


def echo_child(get, put):
    while True:
        m = get()
        if m is None:
            return
        put(m)


def echo_queues(q_in, q_out):
    echo_child(q_in.get, q_out.put)


def echo_pipe(conn):
    echo_child(conn.recv, conn.send)


class CartPole:
    """The classic cart-pole (the same equations as fiber's examples/cartpole.hpp), with a fixed
    1 ms sleep per step: an environment that waits rather than computes."""
    def __init__(self, seed=0, cost=0.001):
        self.rng = random.Random(seed)
        self.cost = cost
        self.state = (0.0, 0.0, 0.0, 0.0)

    def reset(self):
        self.state = tuple(self.rng.uniform(-0.05, 0.05) for _ in range(4))
        return self.state

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = 10.0 if action == 1 else -10.0
        c, s = math.cos(theta), math.sin(theta)
        temp = (force + 0.05 * theta_dot ** 2 * s) / 1.1
        thetaacc = (9.8 * s - c * temp) / (0.5 * (4.0 / 3.0 - 0.1 * c ** 2 / 1.1))
        xacc = temp - 0.05 * thetaacc * c / 1.1
        x, x_dot = x + 0.02 * x_dot, x_dot + 0.02 * xacc
        theta, theta_dot = theta + 0.02 * theta_dot, theta_dot + 0.02 * thetaacc
        self.state = (x, x_dot, theta, theta_dot)
        if self.cost:
            time.sleep(self.cost)
        done = abs(x) > 2.4 or abs(theta) > 12 * 2 * math.pi / 360
        return self.state, 1.0, done, {}


# ---- the peers' pools ----

class mp_pool:
    lib = "multiprocessing"

    def __init__(self, w, initializer=None):
        import multiprocessing
        self.pool = multiprocessing.get_context().Pool(w)

    def map1(self, f, xs):
        return self.pool.map(f, xs, chunksize=1)

    def map(self, f, xs):
        return self.pool.map(f, xs)

    def submit(self, f, *a):
        return self.pool.apply_async(f, a)

    def result(self, h):
        return h.get()

    def one(self):
        return self.pool.apply(trivial, (1,))

    def close(self):
        self.pool.close()
        self.pool.join()


class seed_pool(mp_pool):
    lib = "uber/fiber"

    def __init__(self, w):
        import fiber
        self.pool = fiber.Pool(w)

    def close(self):
        self.pool.terminate()
        self.pool.join()


class loky_pool:
    def __init__(self, w):
        from loky import get_reusable_executor
        self.ex = get_reusable_executor(max_workers=w)
        self.w = w

    def map1(self, f, xs):
        return list(self.ex.map(f, xs, chunksize=1))

    def map(self, f, xs):  # multiprocessing's default chunks
        return list(self.ex.map(f, xs, chunksize=max(1, -(-len(xs) // (4 * self.w)))))

    def submit(self, f, *a):
        return self.ex.submit(f, *a)

    def result(self, h):
        return h.result()

    def one(self):
        return self.ex.submit(trivial, 1).result()

    def close(self):
        self.ex.shutdown(wait=True, kill_workers=True)


class dask_pool:
    def __init__(self, w):
        from distributed import Client, LocalCluster
        self.cluster = LocalCluster(n_workers=w, threads_per_worker=1, processes=True, dashboard_address=None)
        self.client = Client(self.cluster)
        self.w = w

    def map1(self, f, xs):
        return self.client.gather(self.client.map(f, xs, pure=False))

    def map(self, f, xs):
        import dask.bag as db
        return db.from_sequence(xs, npartitions=4 * self.w).map(f).compute(scheduler=self.client.get)

    def submit(self, f, *a):
        return self.client.submit(f, *a, pure=False)

    def result(self, h):
        return h.result()

    def one(self):
        return self.client.submit(trivial, 1, pure=False).result()

    def close(self):
        self.client.close()
        self.cluster.close()


class ray_pool:
    """Plain tasks (Ray's natural form); `pool` is ray.util.multiprocessing.Pool."""
    def __init__(self, w):
        import ray
        self.ray = ray
        ray.init(num_cpus=w, include_dashboard=False, log_to_driver=False, configure_logging=False)
        self.remote = {}
        self.w = w
        self._pool = None

    def task(self, f):
        if f not in self.remote:
            self.remote[f] = self.ray.remote(f)
        return self.remote[f]

    def pool(self):
        if self._pool is None:
            from ray.util.multiprocessing import Pool
            self._pool = Pool(self.w)
        return self._pool

    def map1(self, f, xs):
        t = self.task(f)
        return self.ray.get([t.remote(x) for x in xs])

    def map(self, f, xs):
        return self.pool().map(f, xs)

    def submit(self, f, *a):
        return self.task(f).remote(*a)

    def result(self, h):
        return self.ray.get(h)

    def one(self):
        return self.ray.get(self.task(trivial).remote(1))

    def close(self):
        if self._pool is not None:
            self._pool.close()
        self.ray.shutdown()


POOLS = {"mp": mp_pool, "seed": seed_pool, "loky": loky_pool, "dask": dask_pool, "ray": ray_pool}


def emit(peer, workload, **kv):
    print(peer, workload, " ".join("%s=%s" % (k, v) for k, v in kv.items()), flush=True)


def median_of(repeat, f):
    return statistics.median(f() for _ in range(repeat))


# ---- the workloads ----

def warm_pool(name, w, tasks):
    """The peer's pool of w workers, each of them up (tasks of 1 ms at chunksize 1)."""
    p = POOLS[name](w)
    p.map1(sleep_task, [0.001] * tasks)
    return p


def w_pool(name, args):
    cal = {d: measured_sleep(d) for d in (0.0, 0.001)}
    for w in (2, 4):
        p = warm_pool(name, w, w * 20)
        forms = [("", p.map1)]
        if name == "ray":
            forms.append(("_pool", lambda f, xs: p.pool().map(f, xs, chunksize=1)))
            forms[-1][1](sleep_task, [0.001] * (w * 20))
        for suffix, map1 in forms:
            for d in (0.0, 0.001):
                n = 5000

                def once():
                    t = now()
                    r = map1(sleep_task, [d] * n)
                    assert len(r) == n
                    return now() - t
                wall = median_of(args.repeat, once)
                emit(name + suffix, "overhead", W=w, D_us=int(d * 1e6), ovh_cal_us="%.1f" % ((wall - n * cal[d] / w) / n * 1e6))
        xs = list(range(100000))

        def bulk():
            t = now()
            r = p.map(trivial, xs)
            assert list(r)[-1] == 99999
            return now() - t
        emit(name + ("_pool" if name == "ray" else ""), "throughput", W=w, tasks_per_s="%.0f" % (len(xs) / median_of(args.repeat, bulk)))
        lat = []
        for _ in range(200):
            t = now()
            p.one()
            lat.append(now() - t)
        emit(name, "latency", W=w, us="%.1f" % (statistics.median(lat) * 1e6))
        p.close()


def w_framework(name, args):
    if name not in POOLS:
        return
    rounds, d = 200, 0.001
    cal = measured_sleep(d)
    p = warm_pool(name, 5, 100)

    def once():
        t = now()
        for _ in range(rounds):
            hs = [p.submit(sleep_task, d) for _ in range(5)]
            for h in hs:
                p.result(h)
        return now() - t
    wall = median_of(args.repeat, once)
    emit(name, "framework", W=5, ratio_to_ideal="%.3f" % (wall / (rounds * cal)))
    p.close()


def w_es(name, args):
    if name not in POOLS:
        return
    p = warm_pool(name, 4, 40)
    theta = array('d', (float(i) for i in range(10000)))
    times = []
    for g in range(20 * args.repeat):
        t = now()
        seeds = range(g * 256, g * 256 + 256)
        if name == "ray":
            ref = p.ray.put(theta)
            t2 = p.task(es_evaluate2)
            fitness = p.ray.get([t2.remote(ref, s) for s in seeds])
        elif name == "dask":
            shared = p.client.scatter(theta, broadcast=True)
            fitness = p.client.gather(p.client.map(es_evaluate2, [shared] * 256, seeds, pure=False))
        else:
            fitness = p.map(es_evaluate, [(theta, s) for s in seeds])
        times.append(now() - t)
        theta[g % 10000] += 1e-3 * fitness[0]
    emit(name, "es", W=4, ms_per_generation="%.2f" % (statistics.median(times) * 1e3))
    p.close()


def w_payload(name, args):
    if name not in POOLS:
        return
    p = warm_pool(name, 4, 40)
    payloads = [bytes(8_000_000) for _ in range(64)]

    def once():
        t = now()
        if name == "ray":
            r = p.map1(payload_sum, payloads)  # a task per payload (each argument goes to the object store)
        elif name == "dask":
            # Scattered first, as Dask's own warning advises for large arguments to client.map.
            r = p.client.gather(p.client.map(payload_sum, p.client.scatter(payloads), pure=False))
        elif name == "seed":
            # Its nanomsg sockets keep nanomsg's NN_RCVMAXSIZE of 1 MiB (nothing in it sets the
            # option), and a longer message is dropped by the receiver: the map never ends.
            r = within(60, lambda: p.pool.map(payload_sum, payloads),
                       "uber/fiber's map of 8 MB arguments: no result in 60 s (nanomsg drops messages over "
                       "its NN_RCVMAXSIZE of 1 MiB, which uber/fiber leaves at its default)")
        else:
            r = p.map(payload_sum, payloads)
        assert len(r) == 64
        return now() - t
    emit(name, "payload", W=4, MB_per_s="%.0f" % (64 * 8_000_000 / median_of(args.repeat, once) / 1e6))
    p.close()


def within(seconds, f, what):
    """f() on a thread of its own, for a call with no timeout of its own that may never return."""
    import threading
    out = []
    t = threading.Thread(target=lambda: out.append(f()), daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        raise TimeoutError(what)
    return out[0]


def rss_mb(pids):
    total = 0
    for pid in pids:
        try:
            with open("/proc/%d/statm" % pid) as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            pass
    return total / 1e6


def w_ready(name, args):
    if name not in POOLS:
        return
    # 32 for Ray and Dask: a Ray worker takes ~110 MB here (printed below), 256 of them more than
    # the machine's 24 GiB; a Dask LocalCluster of 256 was not ready after 5 minutes (256
    # processes up, 10 GB in use), where one of 32 is ready in seconds.
    w = 32 if name in ("ray", "dask") else 256
    # The median of 3 pools, each from its creation until every worker has run a task: what
    # fiber's pool_ready_ran_a_task measures.
    took, rss = [], 0.0
    for _ in range(3):
        t = now()
        p = POOLS[name](w)
        seen = set()
        while len(seen) < w:
            seen.update(p.map1(sleepy_pid, range(w)))
        took.append(now() - t)
        rss = rss_mb(descendants(os.getpid())) / w
        p.close()
    emit(name, "ready", W=w, s="%.2f" % statistics.median(took), rss_mb_per_worker="%.0f" % rss)


def w_start(name, args):
    n = 20
    if name in ("mp", "seed"):
        if name == "mp":
            import multiprocessing as lib
        else:
            import fiber as lib

        def once():
            t = now()
            c = lib.Process(target=noop)
            c.start()
            c.join()
            assert c.exitcode == 0
            return now() - t
        once()
        emit(name, "start", ms="%.2f" % (statistics.median(once() for _ in range(n)) * 1e3))
    elif name == "ray":
        import ray
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
        task = ray.remote(noop)

        @ray.remote
        class Actor:
            def ping(self):
                return None
        ray.get(task.remote())

        def one_task():
            t = now()
            ray.get(task.remote())
            return now() - t

        def one_actor():
            t = now()
            a = Actor.remote()
            ray.get(a.ping.remote())
            ray.kill(a)
            return now() - t
        emit("ray", "start", ms="%.2f" % (statistics.median(one_task() for _ in range(n)) * 1e3))
        one_actor()
        emit("ray_actor", "start", ms="%.2f" % (statistics.median(one_actor() for _ in range(n)) * 1e3))
        ray.shutdown()
    elif name == "dask":
        p = dask_pool(2)
        p.one()

        def once():
            t = now()
            p.client.submit(noop, pure=False).result()
            return now() - t
        emit("dask", "start", ms="%.2f" % (statistics.median(once() for _ in range(n)) * 1e3))
        p.close()


def w_rtt(name, args):
    trips = 2000
    if name in ("mp", "seed"):
        if name == "mp":
            import multiprocessing
            lib = multiprocessing.get_context()
        else:
            import fiber as lib
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mp"))
        from queue_pingpong import start_child
        for channel in ("SimpleQueue", "Pipe"):
            c, put, get = start_child(lib, channel, echo_queues, echo_pipe)
            for _ in range(200):
                put(SMALL)
                assert get() == SMALL

            def once():
                t = now()
                for _ in range(trips):
                    put(SMALL)
                    get()
                return (now() - t) / trips
            emit(name, "rtt", channel=channel, us="%.1f" % (median_of(args.repeat, once) * 1e6))
            put(None)
            c.join()
    elif name == "ray":
        import ray
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)

        @ray.remote
        class Echo:
            def echo(self, x):
                return x
        a = Echo.remote()
        for _ in range(200):
            ray.get(a.echo.remote(SMALL))

        def once():
            t = now()
            for _ in range(trips):
                ray.get(a.echo.remote(SMALL))
            return (now() - t) / trips
        emit("ray", "rtt", channel="actor", us="%.1f" % (median_of(args.repeat, once) * 1e6))
        ray.shutdown()
    elif name == "dask":
        p = dask_pool(2)
        for _ in range(20):
            p.client.submit(echo, SMALL, pure=False).result()

        def once():
            t = now()
            for _ in range(200):
                p.client.submit(echo, SMALL, pure=False).result()
            return (now() - t) / 200
        emit("dask", "rtt", channel="future", us="%.1f" % (median_of(args.repeat, once) * 1e6))
        p.close()


def manager_class(attr):
    """The manager class named `EnvManager_<peer>_<mode>`, made on first use: its base class comes
    from the peer's library, which only that peer's process imports."""
    if attr not in globals():
        _, peer, mode = attr.split("_")
        if peer == "mp":
            from multiprocessing.managers import SyncManager as base
        elif mode == "async":
            from fiber.managers import AsyncManager as base
        else:
            from fiber.managers import SyncManager as base
        body = {"__module__": __name__}
        if peer == "seed":
            # uber/fiber's start() hands multiprocessing's _finalize_manager five arguments;
            # Python since (3.11.7 here) takes a sixth, shutdown_timeout, so its shutdown() raised TypeError
            # and left the server running. The shim passes multiprocessing's default.
            import multiprocessing.managers as mpm

            def _finalize_manager(process, address, authkey, state, _Client, shutdown_timeout=1.0):
                mpm.BaseManager._finalize_manager(process, address, authkey, state, _Client, shutdown_timeout)
            body["_finalize_manager"] = staticmethod(_finalize_manager)
        cls = type(attr, (base,), body)
        cls.register("CartPole", CartPole)
        globals()[attr] = cls
    return globals()[attr]


def __getattr__(attr):
    # A manager's process finds its class by name in this module (pickle's lookup ends here).
    if attr.startswith("EnvManager_"):
        return manager_class(attr)
    raise AttributeError(attr)


def harness(step_all, reset, envs, steps=200):
    rng = random.Random(1234)
    t = now()
    for _ in range(steps):
        results = step_all([rng.randrange(2) for _ in envs])
        for j, (_, _, done, _) in enumerate(results):
            if done:
                reset(j)
    return now() - t


def w_managers(name, args):
    n = 4
    if name in ("mp", "seed"):
        modes = ["sync"] if name == "mp" else ["sync", "async"]
        for mode in modes:
            cls = manager_class("EnvManager_%s_%s" % (name, mode))
            managers = [cls() for _ in range(n)]
            for m in managers:
                m.start()
            envs = [m.CartPole(i) for i, m in enumerate(managers)]
            if mode == "async":
                [h.get() for h in [e.reset() for e in envs]]
                step_all = lambda acts: [h.get() for h in [e.step(a) for e, a in zip(envs, acts)]]
                reset = lambda j: envs[j].reset().get()
            else:
                [e.reset() for e in envs]
                step_all = lambda acts: [e.step(a) for e, a in zip(envs, acts)]
                reset = lambda j: envs[j].reset()
            emit(name, "managers", mode=mode, steps_s="%.3f" % median_of(args.repeat, lambda: harness(step_all, reset, envs)))
            for m in managers:
                m.shutdown()
    elif name == "ray":
        import ray
        ray.init(num_cpus=n, include_dashboard=False, log_to_driver=False, configure_logging=False)
        Remote = ray.remote(CartPole)
        envs = [Remote.remote(i) for i in range(n)]
        ray.get([e.reset.remote() for e in envs])
        step_all = lambda acts: ray.get([e.step.remote(a) for e, a in zip(envs, acts)])
        reset = lambda j: ray.get(envs[j].reset.remote())
        emit("ray", "managers", mode="async", steps_s="%.3f" % median_of(args.repeat, lambda: harness(step_all, reset, envs)))
        ray.shutdown()
    elif name == "dask":
        p = dask_pool(n)
        envs = [p.client.submit(CartPole, i, actor=True, workers=[a], pure=False).result()
                for i, a in enumerate(sorted(p.client.scheduler_info()["workers"]))]
        [e.reset().result() for e in envs]
        step_all = lambda acts: [h.result() for h in [e.step(a) for e, a in zip(envs, acts)]]
        reset = lambda j: envs[j].reset().result()
        emit("dask", "managers", mode="async", steps_s="%.3f" % median_of(args.repeat, lambda: harness(step_all, reset, envs)))
        p.close()


# The pi programs, each written as its library's user would, around one sampling function.
PI_INSIDE = """
import random
def inside(p):
    x, y = random.random(), random.random()
    return x * x + y * y < 1
"""
PI_PROGRAMS = {
    # uber/fiber's README, as it is; multiprocessing's the same with its Pool.
    "seed": """
import fiber
if __name__ == '__main__':
    NUM_SAMPLES = int(1e6)
    pool = fiber.Pool(processes=4)
    count = sum(pool.map(inside, range(0, NUM_SAMPLES)))
    print("Pi is roughly {}".format(4.0 * count / NUM_SAMPLES))
    pool.terminate()
""",
    "mp": """
import multiprocessing
if __name__ == '__main__':
    NUM_SAMPLES = int(1e6)
    with multiprocessing.Pool(processes=4) as pool:
        count = sum(pool.map(inside, range(0, NUM_SAMPLES)))
    print("Pi is roughly {}".format(4.0 * count / NUM_SAMPLES))
""",
    "loky": """
from loky import get_reusable_executor
if __name__ == '__main__':
    NUM_SAMPLES = int(1e6)
    ex = get_reusable_executor(max_workers=4)
    count = sum(ex.map(inside, range(0, NUM_SAMPLES), chunksize=NUM_SAMPLES // 16))
    print("Pi is roughly {}".format(4.0 * count / NUM_SAMPLES))
    ex.shutdown(wait=True, kill_workers=True)
""",
    "ray": """
import ray
from ray.util.multiprocessing import Pool
if __name__ == '__main__':
    NUM_SAMPLES = int(1e6)
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, configure_logging=False)
    pool = Pool(processes=4)
    count = sum(pool.map(inside, range(0, NUM_SAMPLES)))
    print("Pi is roughly {}".format(4.0 * count / NUM_SAMPLES))
    pool.close()
    ray.shutdown()
""",
    "dask": """
import dask.bag as db
from distributed import Client, LocalCluster
if __name__ == '__main__':
    NUM_SAMPLES = int(1e6)
    with LocalCluster(n_workers=4, threads_per_worker=1, dashboard_address=None) as cluster, Client(cluster) as client:
        count = db.from_sequence(range(NUM_SAMPLES), npartitions=16).map(inside).sum().compute()
    print("Pi is roughly {}".format(4.0 * count / NUM_SAMPLES))
""",
}


def w_pi(name, args):
    """Each repetition runs fiber's example, then the peer's program (or the other way round, by
    turns), each a fresh process, timed from its start to its exit."""
    if name not in PI_PROGRAMS:
        return
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "pi_%s.py" % name)
        with open(path, "w") as f:
            f.write(PI_INSIDE + PI_PROGRAMS[name])
        runs = {"fiber": [args.fiber_pi] if args.fiber_pi else None, name: [sys.executable, path]}
        times = {k: [] for k, v in runs.items() if v}
        for r in range(args.repeat):
            order = list(times) if r % 2 == 0 else list(reversed(list(times)))
            for k in order:
                t = now()
                out = subprocess.run(runs[k], cwd=d, capture_output=True, text=True, timeout=600)
                took = now() - t
                if out.returncode != 0 or "Pi is roughly" not in out.stdout:
                    raise RuntimeError("%s's pi program failed: %s %s" % (k, out.stdout, out.stderr[-2000:]))
                times[k].append(took)
        for k, v in times.items():
            emit(name if k == name else "fiber_beside_" + name, "pi", s="%.2f" % statistics.median(v))


WORKLOADS = {"start": w_start, "rtt": w_rtt, "pool": w_pool, "framework": w_framework, "es": w_es,
             "managers": w_managers, "payload": w_payload, "ready": w_ready, "pi": w_pi}


def run_peer(name, args):
    for wl in args.workloads.split(","):
        try:
            WORKLOADS[wl](name, args)
        except Exception as e:  # one workload failing must not hide the others'
            emit(name, wl, error=repr(e).replace(" ", "_")[:300])


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
    ap.add_argument("--peers", default="mp,seed,loky,dask,ray")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--fiber-pi", help="fiber's pi example, run beside each peer's pi program")
    ap.add_argument("--peer", help=argparse.SUPPRESS)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if args.peer:
        run_peer(args.peer, args)
        return
    for name in args.peers.split(","):
        # A session of its own: every process the peer starts (Ray's raylet and GCS, Dask's
        # nanny and workers, loky's, multiprocessing's and uber/fiber's workers) is found and
        # stopped by pid, even one that left its parent.
        argv = [sys.executable, os.path.abspath(__file__), "--peer", name, "--repeat", str(args.repeat),
                "--workloads", args.workloads] + (["--fiber-pi", args.fiber_pi] if args.fiber_pi else [])
        child = subprocess.Popen(argv, start_new_session=True, env=dict(os.environ, FIBER_BACKEND="local"))
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
