#!/usr/bin/env bash
# Runs a test binary as the master inside a two-node Slurm allocation (sbatch -N2), so that every
# child it starts is a job step (slurm_mode=auto picks steps there). Prints the binary's output
# and exits with its code; 77 (skipped) when no test cluster answers and engines are not required.
set -uo pipefail
binary=$1
shift
source "$(dirname "$0")/test_cluster.sh"
out=$(mktemp /tmp/fiber-steps-XXXXXX.out)
ids=$(mktemp /tmp/fiber-steps-XXXXXX.id)
cleanup() {
  local job
  job=$(head -n1 "$ids" 2>/dev/null | cut -d';' -f1)
  [ -n "${sbatch_pid-}" ] && kill -0 "$sbatch_pid" 2>/dev/null && [ -n "$job" ] && scancel "$job" 2>/dev/null
  rm -f "$out" "$ids"
}
trap cleanup EXIT
trap 'exit 143' TERM INT
# Two CPUs on each node: steps asking for two (a pool's workers with cpu=2) fit. sbatch --wait
# ends with the job and exits with its code.
sbatch --parsable --wait -N2 --cpus-per-task=2 --time=15 --job-name=fiber-test-steps -o "$out" \
  --export=ALL,FIBERTEST_BACKEND=slurm --wrap "exec $(printf '%q ' "$binary" "$@")" >"$ids" &
sbatch_pid=$!
wait "$sbatch_pid"
rc=$?
sbatch_pid=
cat "$out"
echo "[steps run: sbatch --wait exited with $rc]"
exit "$rc"
