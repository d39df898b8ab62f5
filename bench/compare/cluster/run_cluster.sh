#!/usr/bin/env bash
# The cluster comparison: fiber and its peers (cluster_peers.py) on the Slurm test cluster's two
# nodes, row by row in one run, fiber first in round 1 and last in round 2; then the table of
# fiber ÷ peer (table.py). The peers live in a virtual environment of their own, outside the
# clone, installed once from pinned wheels (requirements.txt). Whatever Slurm jobs a run leaves
# behind are cancelled after it (the ids squeue shows that it did not show before).
#   bench/compare/cluster/run_cluster.sh BUILD_DIR      (bench/compare/run.sh cluster calls it)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
env=${FIBER_CLUSTER_ENV:-$HOME/.cache/fiber/cluster/venv}
if ! cmp -s "$here/requirements.txt" "$env/installed.txt" 2>/dev/null; then
  echo "== cluster: installing $(grep -v '^#' "$here/requirements.txt" | tr '\n' ' ') into $env"
  python3 -m venv "$env"
  "$env/bin/pip" install -q --only-binary :all: -r "$here/requirements.txt"
  cp "$here/requirements.txt" "$env/installed.txt"
fi
"$root/scripts/engines.sh" start slurm
export SLURM_CONF="$root/build/engines/slurm/slurm.conf"
sinfo -h -o %T | grep -qE 'idle|mix' || { echo "the test Slurm cluster does not answer" >&2; exit 1; }
out="$build/cluster-last"
rm -rf "$out" && mkdir -p "$out"
export CLUSTER_TMP="$out"  # the peers' job files: on the file system the nodes share
# A peer's process group that would outlive its script if the run is stopped (Ray's head): each
# leaves its id in a .pgid file while it lives, and whatever is left is ended on the way out.
end_left_groups() {
  local f
  for f in "$out"/*.pgid; do
    [ -e "$f" ] || continue
    kill -KILL -- "-$(cat "$f")" 2>/dev/null
    rm -f "$f"
  done
}
trap end_left_groups EXIT
# CLUSTER_PEERS picks some peers, CLUSTER_ROWS some rows (by their first word: ready, overhead,
# throughput, broadcast, args, framework, kill, load; or one row's words joined by _: ready_32). A start waits for
# Slurm's scheduling loop (batch jobs wait up to batch_sched_delay, 3 s, whoever submits), so the ready row runs CLUSTER_READY_RUNS
# times per system and round, and the table shows their median.
read -r -a peers <<<"${CLUSTER_PEERS-dask submitit hyperqueue ray}"
# HyperQueue's `hq` (its server and worker): PyPI's wheel carries only its Python API (and a
# server with workers in one local process), so `hq` is built once from its source at the tag of
# the wheel's version (FIBER_HQ_SOURCE: a checkout of it already here, else cargo fetches it).
hq_version=0.26.2 hq_commit=dd15afd317f3f57cb70f16b51eba14013c63972b
hq_root="$(dirname "$env")/hq-$hq_version"
if [[ " ${peers[*]} " == *" hyperqueue "* ]] && [ ! -x "$hq_root/bin/hq" ]; then
  echo "== cluster: building HyperQueue's hq $hq_version from its source (once)"
  # The version a release build names itself by, which the Python API checks against its own.
  export HQ_BUILD_VERSION="v$hq_version"
  if [ -n "${FIBER_HQ_SOURCE:-}" ]; then
    cargo install -q --locked --root "$hq_root" --path "$FIBER_HQ_SOURCE/crates/hyperqueue"
  else
    cargo install -q --locked --root "$hq_root" --git https://github.com/It4innovations/hyperqueue --rev "$hq_commit" hyperqueue
  fi
fi
export CLUSTER_HQ="$hq_root/bin/hq"
# Workers ready at 32 and 128 need more CPUs than the test cluster's 4 a node: a row that does not
# fit says so, with the setting that makes it fit (the cluster started with more slots a node).
cpus_per_worker=${CLUSTER_CPUS_PER_WORKER:-2}
export CLUSTER_CPUS_PER_WORKER=$cpus_per_worker
slots=$(sinfo -h -o %C | cut -d/ -f4)
rows=("ready 4" "ready 32" "ready 128" "overhead 4 0 2000" "overhead 4 1 2000" "throughput 4 100000" "broadcast 4 64" "args 4 64 8"
      "framework 4 200 1" "kill 4 200 50" "load 4 ${CLUSTER_LOAD_SECONDS:-600}")
only=${CLUSTER_ROWS:-ready overhead throughput broadcast args framework kill load}
ready_runs=${CLUSTER_READY_RUNS:-5}
jobs_now() { squeue -h -o %i | sort; }
# The controller's load: each system's Slurm commands go through these, which log the time and the
# command's name (on the shared file system: calls made on the nodes count too) and run the real one.
wrappers="$out/slurm-wrappers" calls="$out/slurm-calls.log"
mkdir -p "$wrappers"
for c in sbatch squeue sacct scontrol scancel srun sinfo sstat; do
  real=$(command -v "$c") || continue
  printf '#!/bin/sh\necho "$(date +%%s%%N) %s" >>"%s"\nexec "%s" "$@"\n' "$c" "$calls" "$real" >"$wrappers/$c"
  chmod +x "$wrappers/$c"
done
# The Slurm commands a system called during its map, per minute, as words for its row's line.
load_words() {
  python3 - "$calls" "$1" <<'PY'
import collections, re, sys
line = sys.argv[2]
t0, t1 = (int(re.search(k + r"=(\d+)", line).group(1)) for k in ("map_from", "map_to"))
minutes = (t1 - t0) / 60e9
by = collections.Counter(c for t, c in (l.split() for l in open(sys.argv[1])) if t0 <= int(t) <= t1)
print(" ".join(f"{c}_per_min={by[c] / minutes:.1f}" for c in sorted(by)), f"calls_per_min={sum(by.values()) / minutes:.1f}")
PY
}
# Every run starts on an idle cluster: the last one's jobs gone, completing ones too (Slurm frees
# a node's CPUs only once a job's cleanup ends, which would bill the next system's start).
settle() {
  local tries=0
  until [ -z "$(squeue -h -o %i)" ] && [ -z "$(sinfo -h -N -o %T | grep -v '^idle$')" ]; do
    ((++tries <= 600)) || { echo "!! the cluster did not go idle in 60 s" >&2; return 1; }
    sleep 0.1
  done
}
# One row of one system: its line (or the error it gave) into rows.txt, and its jobs gone after.
run_one() {
  local system=$1 round=$2 row=$3 before line
  read -r -a words <<<"$row"
  if [ "${words[0]}" = ready ] && ((words[1] * cpus_per_worker > slots)); then
    echo "system=$system round=$round spec=${row// /_} row=ready error=${words[1]}_workers_of_${cpus_per_worker}_CPUs_do_not_fit_the_cluster's_${slots}:_start_it_with_FIBER_SLURM_NODE_CPUS=$((words[1] * cpus_per_worker / 2))_(scripts/engines.sh_stop_slurm_first)" | tee -a "$out/rows.txt"
    return
  fi
  settle
  [ "${words[0]}" = ready ] && words+=("$(date +%s%N)")
  if [ "${words[0]}" = kill ]; then  # where each run of a task leaves a line: the nodes share it
    words+=("$(mktemp -d "$out/kill-$system-XXXX")")
  fi
  before=$(jobs_now)
  : >"$calls"
  local path=$PATH
  [ "${words[0]}" = load ] && path="$wrappers:$PATH"
  if [ "$system" = fiber ]; then
    line=$(PATH=$path FIBER_BACKEND=slurm FIBER_CPU_PER_JOB=$cpus_per_worker timeout 1800 "$build/bench/cluster_bench" "${words[@]}" 2>"$out/err" | grep '^row=' || true)
  elif [ "$system" = dragon ] && [ "${words[0]}" = kill ]; then
    line="row=kill error=Dragon's_workers_share_one_allocation:_no_worker_has_a_job_of_its_own_to_cancel,_and_cancelling_the_allocation_ends_the_run"
  elif [ "$system" = dragon ]; then
    # Dragon's launcher starts its runtime on each node of the allocation it runs in (by srun).
    line=$(PATH="$env/bin:$path" timeout 1800 salloc -N 2 --ntasks-per-node=1 --cpus-per-task=4 --mem=1800M -J dragon-peer \
      "$env/bin/dragon" "$here/cluster_peers.py" dragon "${words[@]}" 2>"$out/err" | grep '^row=' || true)
  else
    line=$(PATH=$path timeout 1800 "$env/bin/python" "$here/cluster_peers.py" "$system" "${words[@]}" 2>"$out/err" | grep '^row=' || true)
  fi
  [[ "$line" == *map_from=* ]] && line="$line $(load_words "$line")"
  [ -n "$line" ] || line="row=${words[0]} error=$(grep -v '^\s*$' "$out/err" | tail -1 | tr ' ' '_')"
  echo "system=$system round=$round spec=${row// /_} $line" | tee -a "$out/rows.txt"
  local left
  left=$(comm -13 <(echo "$before") <(jobs_now) | tr '\n' ' ')
  [ -z "${left// /}" ] || scancel $left
}
for round in 1 2; do
  echo "== cluster, round $round"
  order=(fiber "${peers[@]}")
  [ $round = 2 ] && order=("${peers[@]}" fiber)
  for row in "${rows[@]}"; do
    [[ " $only " == *" ${row%% *} "* || " $only " == *" ${row// /_} "* ]] || continue
    runs=1
    [ "${row%% *}" = ready ] && runs=$ready_runs
    for ((k = 0; k < runs; ++k)); do
      for system in "${order[@]}"; do run_one "$system" "$round" "$row"; done
    done
  done
done
python3 "$here/table.py" "$out/rows.txt"
