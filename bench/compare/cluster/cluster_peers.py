"""The peers' side of the cluster comparison (bench/compare/run.sh cluster): one row per run, for
one peer, on the Slurm cluster SLURM_CONF names, printed as the `key=value` words bench/cluster_bench
prints for fiber, so that run.sh sets them side by side.

    cluster_peers.py PEER ready N T0_NS        N workers ready; seconds since T0_NS (CLOCK_REALTIME)
    cluster_peers.py PEER overhead N MS TASKS  TASKS tasks of MS ms, one at a time: µs of overhead each
    cluster_peers.py PEER throughput N TASKS   TASKS trivial tasks: tasks per second
    cluster_peers.py PEER broadcast N MB       one MB-megabyte array read by a task on each worker: seconds
    cluster_peers.py PEER args N COUNT MB      COUNT distinct MB-megabyte arrays, one task each: seconds
    cluster_peers.py PEER framework N ROUNDS MS  ROUNDS rounds of N tasks of MS ms: µs of overhead a round
    cluster_peers.py PEER kill N TASKS MS DIR  TASKS tasks of MS ms; once a quarter have run, one running
                                               worker's Slurm job is cancelled: does the map complete,
                                               how many tasks ran again (DIR/runs), time beyond ideal
    cluster_peers.py PEER load N SECONDS       a map of 100 ms tasks lasting SECONDS: its start and end
                                               (run.sh counts the Slurm commands called in between)

PEER: dask (dask-jobqueue's SLURMCluster), dask-tls (the same over TLS), submitit, hyperqueue (its server here, each worker
`hq worker start` in a Slurm job; CLUSTER_HQ names the `hq` command), ray (its head here, each
worker `ray start --num-cpus=1` in a Slurm job, as Ray's Slurm guide starts its nodes). Each worker is a Slurm job
of CPUS_PER_WORKER CPUs (2: four workers spread over the test cluster's two 4-CPU nodes, as
fiber's are) and runs one task at a time. A peer whose tasks cost a Slurm job (submitit) or a
Python interpreter (hyperqueue's function tasks) each runs at most its cap of a row's tasks and
says so (`capped=`). Everything a run starts is stopped at its end.
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

CPUS_PER_WORKER = int(os.environ.get("CLUSTER_CPUS_PER_WORKER", "2"))
MEMORY_MB = 900
SUBMITIT_CAP = int(os.environ.get("CLUSTER_SUBMITIT_CAP", "64"))
HQ_CAP = int(os.environ.get("CLUSTER_HQ_CAP", "400"))
# Rounds of the framework row for a peer whose every task is a Slurm job or an interpreter.
SUBMITIT_ROUNDS = 3
HQ_ROUNDS = 10
# How long the kill row waits for a map that lost a worker, at least.
KILL_BOUND_S = 120


def sleep_ms(ms):
    if ms > 0:
        time.sleep(ms / 1000.0)
    return ms


def square(x):
    return x * x


def read_blob(blob, i):
    return float(blob[i % len(blob)]) + len(blob)


def arg_size(v):
    return float(v[0]) + len(v)


def logged_task(item, ms, path):
    """A task of the kill row: one line in `path` per run (reruns too); the Slurm job that ran it."""
    with open(path, "a") as f:
        f.write(f"{item} {os.getpid()}\n")
    sleep_ms(ms)
    return int(os.environ.get("SLURM_JOB_ID", "0"))


def doubles(mb):
    import numpy

    return numpy.ones(int(float(mb) * 1e6 / 8))


def lines(path):
    try:
        with open(path) as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


def address_toward_nodes():
    """This host's address on the network the Slurm nodes reach it by (the route to the first)."""
    out = subprocess.run(["sinfo", "-h", "-N", "-o", "%o"], capture_output=True, text=True, check=True).stdout.split()
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect((out[0], 9))
        return s.getsockname()[0]
    finally:
        s.close()


def emit(row, **kw):
    print("row=" + row + " " + " ".join(f"{k}={v}" for k, v in kw.items()), flush=True)


# ---- dask-jobqueue: a Dask scheduler here, each worker a Slurm job
class dask_peer:
    def __init__(self, n, tmp):
        from dask_jobqueue import SLURMCluster
        from dask.distributed import Client

        self.cluster = SLURMCluster(
            cores=1, processes=1, job_cpu=CPUS_PER_WORKER, memory=f"{MEMORY_MB}MB", walltime="01:00:00",
            python=sys.executable, scheduler_options={"host": address_toward_nodes()},
            local_directory=tmp, log_directory=tmp, job_name="dask-peer", **self.tls_options(tmp))
        self.cluster.scale(jobs=n)
        self.client = Client(self.cluster)
        self.client.wait_for_workers(n)

    def map(self, fn, args, *more):
        return self.client.gather(self.client.map(fn, args, *more, pure=False))

    def broadcast(self, fn, blob, n):
        held = self.client.scatter(blob, broadcast=True)
        return self.client.gather(self.client.map(fn, [held] * n, list(range(n)), pure=False))

    def many(self, fn, payloads):
        return self.client.gather(self.client.map(fn, self.client.scatter(payloads), pure=False))

    def round(self, fn, arg, n):
        return self.client.gather([self.client.submit(fn, arg, pure=False) for _ in range(n)])

    def close(self):
        self.client.close()
        self.cluster.close()

    def tls_options(self, tmp):
        return {}


# ---- the same with TLS between all of Dask's processes, as fiber's links across hosts are: a
# certificate made for the run (Security.temporary), which dask-jobqueue hands its workers as
# files in the shared folder.
class dask_tls_peer(dask_peer):
    def tls_options(self, tmp):
        # Over TLS a worker does not take its address from its route to the scheduler, and fell
        # back to 127.0.0.1: it is told the node's interface.
        return {"protocol": "tls://", "security": True, "shared_temp_directory": tmp,
                "worker_extra_args": ["--interface", "eth0"]}


class by_map:
    """A peer whose one way to run work is its map: the broadcast, the arguments and the
    framework test's rounds are maps too (the argument pickled into each task)."""

    def broadcast(self, fn, blob, n):
        return self.map(fn, [blob] * n, list(range(n)))

    def many(self, fn, payloads):
        return self.map(fn, payloads)

    def round(self, fn, arg, n):
        return self.map(fn, [arg] * n)


# ---- submitit: each task a Slurm job (an array for a map)
class submitit_peer(by_map):
    cap = SUBMITIT_CAP

    def __init__(self, n, tmp):
        import submitit

        self.ex = submitit.AutoExecutor(folder=tmp)
        self.ex.update_parameters(cpus_per_task=CPUS_PER_WORKER, mem_gb=MEMORY_MB / 1024, timeout_min=60,
                                  slurm_array_parallelism=n)
        self.jobs = []

    rounds = SUBMITIT_ROUNDS

    def map(self, fn, args, *more):
        jobs = self.ex.map_array(fn, args, *more)
        self.jobs += jobs
        return [j.result() for j in jobs]

    def close(self):
        for j in self.jobs:
            if j.state not in ("COMPLETED", "FAILED", "CANCELLED"):
                j.cancel(check=False)


# ---- HyperQueue: its server here, each worker `hq worker start` in a Slurm job
class hyperqueue_peer(by_map):
    cap = HQ_CAP

    def __init__(self, n, tmp):
        from hyperqueue import Client
        from hyperqueue.task.function import PythonEnv

        self.hq = os.environ["CLUSTER_HQ"]
        self.dir = os.path.join(tmp, "hq")
        self.workers = []
        self.server = subprocess.Popen([self.hq, "server", "start", "--server-dir", self.dir, "--host", address_toward_nodes()],
                                       stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "hq-server.err"), "w"))
        try:
            self.start(n)
            self.client = Client(self.dir, python_env=PythonEnv(python_bin=sys.executable))
        except BaseException:
            self.close()  # its server and the workers' jobs: nothing left running
            raise

    def start(self, n):
        while subprocess.run(self.command("server", "info"), capture_output=True).returncode != 0:
            if self.server.poll() is not None:
                raise RuntimeError("hq server exited with " + str(self.server.returncode))
            time.sleep(0.05)
        for _ in range(n):
            out = subprocess.run(["sbatch", "--parsable", f"--cpus-per-task={CPUS_PER_WORKER}", f"--mem={MEMORY_MB}M",
                                  "--job-name=hq-peer-worker", "--output=/dev/null",
                                  f"--wrap=exec {self.hq} worker start --server-dir {self.dir} --cpus 1"],
                                 capture_output=True, text=True, check=True).stdout
            self.workers.append(out.strip().split(";")[0])
        while self.connected() < n:
            time.sleep(0.05)

    def command(self, *words):
        return [self.hq, *words, "--server-dir", self.dir]

    def connected(self):
        out = subprocess.run(self.command("worker", "list", "--output-mode", "json"), capture_output=True, text=True)
        return len(json.loads(out.stdout)) if out.returncode == 0 and out.stdout.strip() else 0

    rounds = HQ_ROUNDS

    def map(self, fn, args, *more):
        from hyperqueue import Job

        job = Job()
        for a in zip(args, *more):
            job.function(fn, args=a, stdout=None, stderr=None)
        if not self.client.wait_for_jobs([self.client.submit(job)], raise_on_error=False):
            raise RuntimeError("a HyperQueue task failed")
        return list(args)  # a function task's value stays in its worker: HyperQueue returns none

    def close(self):
        if self.workers:
            subprocess.run(["scancel", *self.workers])
        subprocess.run(self.command("server", "stop"), capture_output=True)
        try:
            self.server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.server.kill()
            self.server.wait()


# ---- Ray: its head here (no CPUs: it schedules, as dask's scheduler does), each worker a Ray node
# of one CPU started by `ray start --block` in a Slurm job
def ray_start_failure(path):
    """The exception a worker's `ray start` ended with, from its job's output; None while none."""
    try:
        with open(path) as f:
            lines = [line.strip() for line in f if line.startswith("Exception:")]
    except OSError:
        return None
    return lines[-1] if lines else None


class ray_peer:
    def __init__(self, n, tmp):
        import ray

        self.rayapi = ray
        self.bin = os.path.join(os.path.dirname(sys.executable), "ray")
        # Ray's default, said outright for the head, its workers (sbatch passes the environment on)
        # and this driver: a token file another Ray program left in ~/.ray made the head demand a
        # token that the driver did not send ("InvalidAuthToken"), and every row failed.
        os.environ["RAY_AUTH_MODE"] = "disabled"
        host = address_toward_nodes()
        with socket.socket() as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
        # Ray's sockets live under its temp dir, whose path must stay short (108 bytes a socket path).
        self.dir = tempfile.mkdtemp(prefix="rayp", dir="/tmp")
        self.address = f"{host}:{port}"
        self.workers = []
        self.head = subprocess.Popen(
            [self.bin, "start", "--head", "--block", f"--node-ip-address={host}", f"--port={port}", "--num-cpus=0",
             "--include-dashboard=false", f"--temp-dir={self.dir}/head", "--object-store-memory=1000000000",
             "--disable-usage-stats"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "ray-head.err"), "w"), start_new_session=True)
        # Its own process group, which outlives this one if this is killed: run.sh ends it then.
        self.group_file = os.path.join(os.environ.get("CLUSTER_TMP", tmp), f"ray-head-{self.head.pid}.pgid")
        with open(self.group_file, "w") as f:
            f.write(str(self.head.pid))
        try:
            self.start(n, host, port, tmp)
        except BaseException:
            self.close()
            raise

    def start(self, n, host, port, tmp):
        while True:  # the head's GCS port answers once it is up
            if self.head.poll() is not None:
                raise RuntimeError("ray start --head exited with " + str(self.head.returncode))
            try:
                socket.create_connection((host, port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        # Each node's own address (the route back to the head) and temp dir: the nodes share one file system.
        script = os.path.join(tmp, "ray-worker.sh")
        with open(script, "w") as f:
            f.write(f"""#!/bin/bash
ip=$({sys.executable} -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(("{host}", 9)); print(s.getsockname()[0])')
exec {self.bin} start --address={self.address} --node-ip-address=$ip --temp-dir={self.dir}/w$SLURM_JOB_ID --num-cpus=1 --block --object-store-memory=300000000 --disable-usage-stats
""")
        for _ in range(n):
            out = subprocess.run(["sbatch", "--parsable", f"--cpus-per-task={CPUS_PER_WORKER}", f"--mem={MEMORY_MB}M",
                                  "--job-name=ray-peer-worker", f"--output={tmp}/ray-worker-%j.out", script],
                                 capture_output=True, text=True, check=True).stdout
            self.workers.append(out.strip().split(";")[0])
        self.rayapi.init(address=self.address, logging_level="ERROR", log_to_driver=False)
        while self.rayapi.cluster_resources().get("CPU", 0) < n:
            # A Ray node that gave up starting (`ray start` waits 30 s for its raylet to register)
            # ends its job: the row fails with its words instead of waiting for a node that is gone.
            for job in self.workers:
                failed = ray_start_failure(os.path.join(tmp, f"ray-worker-{job}.out"))
                if failed:
                    raise RuntimeError(f"a Ray node (Slurm job {job}) did not start: {failed}")
            time.sleep(0.05)

    def remote(self, fn):
        return self.rayapi.remote(num_cpus=1)(fn)

    def map(self, fn, args, *more):
        f = self.remote(fn)
        return self.rayapi.get([f.remote(*a) for a in zip(args, *more)])

    def broadcast(self, fn, blob, n):
        held = self.rayapi.put(blob)
        f = self.remote(fn)
        return self.rayapi.get([f.remote(held, i) for i in range(n)])

    def many(self, fn, payloads):
        return self.map(fn, payloads)

    def round(self, fn, arg, n):
        f = self.remote(fn)
        return self.rayapi.get([f.remote(arg) for _ in range(n)])

    def close(self):
        try:
            self.rayapi.shutdown()
        except Exception:
            pass
        if self.workers:
            subprocess.run(["scancel", *self.workers])
        # The head and what it started (GCS, raylet, agents) are its process group.
        try:
            os.killpg(self.head.pid, 15)
            self.head.wait(timeout=5)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
        try:
            os.killpg(self.head.pid, 9)
        except ProcessLookupError:
            pass
        self.head.wait()
        os.unlink(self.group_file)
        subprocess.run(["rm", "-rf", self.dir])


# ---- DragonHPC: multiprocessing's Pool on Dragon's runtime, which its own launcher starts over the
# Slurm allocation it runs in (run.sh: `salloc -N 2 ... dragon cluster_peers.py dragon ...`)
class dragon_peer(by_map):
    def __init__(self, n, tmp):
        import dragon  # noqa: F401 (registers the "dragon" start method)
        import multiprocessing

        multiprocessing.set_start_method("dragon", force=True)
        self.pool = multiprocessing.Pool(n)
        self.pool.map(sleep_ms, [0] * n, chunksize=1)  # its workers have started

    def map(self, fn, args, *more):
        if more:
            return self.pool.starmap(fn, list(zip(args, *more)), chunksize=1)
        return self.pool.map(fn, args, chunksize=1)

    def close(self):
        self.pool.close()
        self.pool.join()


PEERS = {"dask": dask_peer, "dask-tls": dask_tls_peer, "submitit": submitit_peer, "hyperqueue": hyperqueue_peer, "ray": ray_peer,
         "dragon": dragon_peer}


def cancel_one_worker_when(path, count, done):
    """Once `path` has `count` lines, cancels the first running Slurm job (a worker's: on the idle
    test cluster every running job is this run's); the job's id, or None if the map ended first."""
    while not done.is_set():
        if lines(path) >= count:
            out = subprocess.run(["squeue", "-h", "-t", "R", "-o", "%i"], capture_output=True, text=True).stdout.split()
            if out:
                subprocess.run(["scancel", sorted(out)[0]])
                return sorted(out)[0]
        time.sleep(0.01)
    return None


def main(argv):
    if len(argv) < 4 or argv[0] not in PEERS:
        print(__doc__, file=sys.stderr)
        return 2
    peer, row, n = PEERS[argv[0]], argv[1], int(argv[2])
    cap = getattr(peer, "cap", None)
    with tempfile.TemporaryDirectory(dir=os.environ.get("CLUSTER_TMP")) as tmp:
        if row == "ready":
            t0 = int(argv[3])
            p = peer(n, tmp)
            try:
                # submitit has no workers: N one-task jobs that ran are its N ready workers.
                if isinstance(p, submitit_peer):
                    p.map(sleep_ms, [0] * n)
                emit("ready", workers=n, seconds=f"{(time.time_ns() - t0) / 1e9:.3f}")
            finally:
                p.close()
            return 0
        p = peer(n, tmp)
        try:
            if row == "overhead":
                ms, tasks = int(argv[3]), int(argv[4])
                capped = min(tasks, cap) if cap else tasks
                p.map(sleep_ms, [0] * n)  # every worker warm
                t = time.perf_counter()
                out = p.map(sleep_ms, [ms] * capped)
                s = time.perf_counter() - t
                extra = {"capped": capped} if capped != tasks else {}
                emit("overhead", workers=n, task_ms=ms, tasks=capped, seconds=f"{s:.3f}",
                     overhead_us=f"{(s * n / capped - ms / 1000.0) * 1e6:.1f}", **extra)
                return 0 if len(out) == capped else 1
            if row == "broadcast":
                blob = doubles(argv[3])
                p.map(square, [1] * n)
                t = time.perf_counter()
                out = p.broadcast(read_blob, blob, n)
                emit("broadcast", workers=n, mb=argv[3], seconds=f"{time.perf_counter() - t:.3f}")
                return 0 if len(out) == n else 1
            if row == "args":
                count = int(argv[3])
                capped = min(count, cap) if cap else count
                payloads = [doubles(argv[4]) for _ in range(capped)]
                p.map(square, [1] * n)
                t = time.perf_counter()
                out = p.many(arg_size, payloads)
                extra = {"capped": capped} if capped != count else {}
                emit("args", workers=n, count=capped, mb=argv[4], seconds=f"{time.perf_counter() - t:.3f}", **extra)
                return 0 if len(out) == capped else 1
            if row == "framework":
                rounds, ms = int(argv[3]), int(argv[4])
                capped = min(rounds, getattr(p, "rounds", rounds))
                p.map(sleep_ms, [0] * n)
                t = time.perf_counter()
                for _ in range(capped):
                    p.round(sleep_ms, ms, n)
                s = time.perf_counter() - t
                extra = {"capped": capped} if capped != rounds else {}
                emit("framework", workers=n, rounds=capped, task_ms=ms, seconds=f"{s:.3f}",
                     overhead_us=f"{(s / capped - ms / 1000.0) * 1e6:.1f}", **extra)
                return 0
            if row == "load":
                tasks = n * int(argv[3]) * 10
                capped = min(tasks, cap) if cap else tasks
                t, start = time.perf_counter(), time.time_ns()
                out = p.map(sleep_ms, [100] * capped)
                end = time.time_ns()
                extra = {"capped": capped} if capped != tasks else {}
                emit("load", workers=n, tasks=capped, seconds=f"{time.perf_counter() - t:.3f}", map_from=start, map_to=end,
                     **extra)
                return 0 if len(out) == capped else 1
            if row == "kill":
                tasks, ms, runs = int(argv[3]), int(argv[4]), os.path.join(argv[5], "runs")
                capped = min(tasks, cap) if cap else tasks
                p.map(sleep_ms, [0] * n)
                done, killed = threading.Event(), []
                watch = threading.Thread(target=lambda: killed.append(cancel_one_worker_when(runs, capped // 4, done)))
                watch.start()
                t = time.perf_counter()
                # A peer that never learns its job ended waits for ever: the map gets a bound.
                bound = max(KILL_BOUND_S, 20 * capped * ms / 1000.0 / n)
                result = {}

                def run_map():
                    try:
                        result["out"] = p.map(logged_task, list(range(capped)), [ms] * capped, [runs] * capped)
                    except Exception as e:  # the map did not complete: what it said
                        result["error"] = (type(e).__name__ + ":" + str(e)).replace(" ", "_")[:200]

                mapper = threading.Thread(target=run_map, daemon=True)
                mapper.start()
                mapper.join(bound)
                s = time.perf_counter() - t
                if "out" not in result:
                    done.set()
                    watch.join()
                    error = result.get("error", f"no_result_{bound:.0f}_s_after_the_job_was_cancelled")
                    emit("kill", workers=n, tasks=capped, task_ms=ms, completed="no", error=error, job=killed[0] if killed else "none")
                    p.close()
                    os._exit(0)  # the map's thread may still wait
                out = result["out"]
                done.set()
                watch.join()
                extra = {"capped": capped} if capped != tasks else {}
                emit("kill", workers=n, tasks=capped, task_ms=ms, completed="yes" if len(out) == capped else "no",
                     reruns=lines(runs) - capped, seconds=f"{s:.3f}", extra_s=f"{s - capped * ms / 1000.0 / n:.3f}",
                     job=killed[0] if killed else "none", **extra)
                return 0
            if row == "throughput":
                tasks = int(argv[3])
                capped = min(tasks, cap) if cap else tasks
                p.map(square, [1] * n)
                t = time.perf_counter()
                out = p.map(square, list(range(capped)))
                s = time.perf_counter() - t
                extra = {"capped": capped} if capped != tasks else {}
                emit("throughput", workers=n, tasks=capped, seconds=f"{s:.3f}", tasks_per_s=f"{capped / s:.0f}", **extra)
                return 0 if len(out) == capped else 1
        finally:
            p.close()
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
