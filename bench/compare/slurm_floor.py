#!/usr/bin/env python3
"""Slurm's own floor for starting work, measured in the same run as fiber's figures.

  slurm_floor.py steps   inside an allocation: `srun --overlap --exact -N1 -n1 true`, one, and
                         four at once
  slurm_floor.py batch   outside one: `sbatch --wait --wrap true`, one, and four at once

Prints lines like "steps floor: n=10 median=123.4ms" and "steps floor x4: ... median=...ms".
"""
import statistics, subprocess, sys, time

mode = sys.argv[1] if len(sys.argv) > 1 else "batch"
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 10
if mode == "steps":
    cmd = ["srun", "--overlap", "--exact", "-N1", "-n1", "--quiet", "true"]
else:
    cmd = ["sbatch", "--wait", "--quiet", "-N1", "-n1", "-o", "/dev/null", "--wrap", "true"]

def once(n):
    t0 = time.perf_counter()
    procs = [subprocess.Popen(cmd, stdout=subprocess.DEVNULL) for _ in range(n)]
    for p in procs:
        if p.wait() != 0:
            sys.exit(f"{' '.join(cmd)} failed")
    return (time.perf_counter() - t0) * 1000

for n, label in ((1, f"{mode} floor"), (4, f"{mode} floor x4")):
    once(n)  # warm
    times = [once(n) for _ in range(reps)]
    print(f"{label}: n={reps} median={statistics.median(times):.1f}ms min={min(times):.1f}ms")
