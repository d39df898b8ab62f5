"""The peers' side of the cluster comparison (bench/compare/run.sh cluster): one row per run, for
one peer, on the Slurm cluster SLURM_CONF names, printed as the `key=value` words bench/cluster_bench
prints for fiber, so that run.sh sets them side by side.

    cluster_peers.py PEER ready N T0_NS        N workers ready; seconds since T0_NS (CLOCK_REALTIME)
    cluster_peers.py PEER overhead N MS TASKS  TASKS tasks of MS ms, one at a time: µs of overhead each
    cluster_peers.py PEER throughput N TASKS   TASKS trivial tasks: tasks per second

PEER: dask (dask-jobqueue's SLURMCluster), submitit, hyperqueue (its server here, each worker
`hq worker start` in a Slurm job; CLUSTER_HQ names the `hq` command). Each worker is a Slurm job
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
import time

CPUS_PER_WORKER = int(os.environ.get("CLUSTER_CPUS_PER_WORKER", "2"))
MEMORY_MB = 900
SUBMITIT_CAP = int(os.environ.get("CLUSTER_SUBMITIT_CAP", "64"))
HQ_CAP = int(os.environ.get("CLUSTER_HQ_CAP", "400"))


def sleep_ms(ms):
    if ms > 0:
        time.sleep(ms / 1000.0)
    return ms


def square(x):
    return x * x


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
            local_directory=tmp, log_directory=tmp, job_name="dask-peer")
        self.cluster.scale(jobs=n)
        self.client = Client(self.cluster)
        self.client.wait_for_workers(n)

    def map(self, fn, args):
        return self.client.gather(self.client.map(fn, args, pure=False))

    def close(self):
        self.client.close()
        self.cluster.close()


# ---- submitit: each task a Slurm job (an array for a map)
class submitit_peer:
    cap = SUBMITIT_CAP

    def __init__(self, n, tmp):
        import submitit

        self.ex = submitit.AutoExecutor(folder=tmp)
        self.ex.update_parameters(cpus_per_task=CPUS_PER_WORKER, mem_gb=MEMORY_MB / 1024, timeout_min=60,
                                  slurm_array_parallelism=n)
        self.jobs = []

    def map(self, fn, args):
        jobs = self.ex.map_array(fn, args)
        self.jobs += jobs
        return [j.result() for j in jobs]

    def close(self):
        for j in self.jobs:
            if j.state not in ("COMPLETED", "FAILED", "CANCELLED"):
                j.cancel(check=False)


# ---- HyperQueue: its server here, each worker `hq worker start` in a Slurm job
class hyperqueue_peer:
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

    def map(self, fn, args):
        from hyperqueue import Job

        job = Job()
        for a in args:
            job.function(fn, args=(a,), stdout=None, stderr=None)
        self.client.wait_for_jobs([self.client.submit(job)])
        return args  # a function task's value stays in its worker: HyperQueue returns none

    def close(self):
        if self.workers:
            subprocess.run(["scancel", *self.workers])
        subprocess.run(self.command("server", "stop"), capture_output=True)
        try:
            self.server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.server.kill()
            self.server.wait()


PEERS = {"dask": dask_peer, "submitit": submitit_peer, "hyperqueue": hyperqueue_peer}


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
