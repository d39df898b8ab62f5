#!/usr/bin/env python3
"""Slurm's own floor for starting work, measured in the same run as fiber's figures.

  slurm_floor.py steps [reps] [program args...]
                               inside an allocation: `srun --overlap --exact -N1 -n1 true`, one,
                               and four at once; with a program, also srun of that program (the
                               same binary fiber starts, doing nothing: its loading counts too)
  slurm_floor.py batch [reps]  outside one: `sbatch --wait --wrap true`, one, and four at once
                               (the engine's floor; sbatch --wait checks every 2 s or so), and the
                               same job submitted with `sbatch --parsable` and watched with squeue
                               every 20 ms until it has ended (how fast it can be seen to end)

Prints lines like "steps floor: n=10 median=123.4ms min=...".
"""
import statistics, subprocess, sys, time

mode = sys.argv[1] if len(sys.argv) > 1 else "batch"
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 10
FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}

def run_all(cmd, n):
    procs = [subprocess.Popen(cmd, stdout=subprocess.DEVNULL) for _ in range(n)]
    for p in procs:
        if p.wait() != 0:
            sys.exit(f"{' '.join(cmd)} failed")

def polled(n):
    ids = [subprocess.run(["sbatch", "--parsable", "-N1", "-n1", "-o", "/dev/null", "--wrap", "true"],
                          check=True, capture_output=True, text=True).stdout.strip().split(";")[0] for _ in range(n)]
    while True:
        out = subprocess.run(["squeue", "-h", "-t", "all", "-j", ",".join(ids), "-o", "%T"],
                             capture_output=True, text=True).stdout.split()
        if len(out) == n and all(s in FINAL for s in out):
            return
        time.sleep(0.02)

def measure(label, once, n):
    once(n)  # warm
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        once(n)
        times.append((time.perf_counter() - t0) * 1000)
    print(f"{label}: n={reps} median={statistics.median(times):.1f}ms min={min(times):.1f}ms", flush=True)

if mode == "steps":
    srun = ["srun", "--overlap", "--exact", "-N1", "-n1", "--quiet", "true"]
    measure("steps floor", lambda n: run_all(srun, n), 1)
    measure("steps floor x4", lambda n: run_all(srun, n), 4)
    if len(sys.argv) > 3:
        program = srun[:-1] + sys.argv[3:]
        measure("steps program floor", lambda n: run_all(program, n), 1)
        measure("steps program floor x4", lambda n: run_all(program, n), 4)
else:
    wait = ["sbatch", "--wait", "--quiet", "-N1", "-n1", "-o", "/dev/null", "--wrap", "true"]
    measure("batch floor", lambda n: run_all(wait, n), 1)
    measure("batch floor x4", lambda n: run_all(wait, n), 4)
    measure("batch polled floor", polled, 1)
    measure("batch polled floor x4", polled, 4)
