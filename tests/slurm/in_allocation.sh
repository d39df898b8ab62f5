#!/usr/bin/env bash
# Runs a test binary as the master inside a two-node Slurm allocation (sbatch -N2), so that every
# child it starts is a job step (slurm_mode=auto picks steps there). Prints the binary's output;
# tests/gtest_verdict.py judges the run from gtest's XML report: it passes only when at least one
# test ran and none failed, exits 77 (skipped, with the reason) when every test skipped, and keeps
# the report for scripts/test_summary.py under FIBERTEST_RESULTS_DIR. 77 too when no test cluster
# answers and engines are not required.
set -uo pipefail
binary=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
source "$here/test_cluster.sh"
# The cluster's nodes share this host's /tmp: the job writes its output and report there, in a
# folder of this run's own.
work=$(mktemp -d /tmp/fiber-steps-XXXXXX)
out=$work/out ids=$work/id report=$work/report.xml
cleanup() {
  local job
  job=$(head -n1 "$ids" 2>/dev/null | cut -d';' -f1)
  [ -n "${sbatch_pid-}" ] && kill -0 "$sbatch_pid" 2>/dev/null && [ -n "$job" ] && scancel "$job" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM INT
# Two CPUs on each node: steps asking for two (a pool's workers with cpu=2) fit. sbatch --wait
# ends with the job and exits with its code.
sbatch --parsable --wait -N2 --cpus-per-task=2 --time=15 --job-name=fiber-test-steps -o "$out" \
  --export=ALL,FIBERTEST_BACKEND=slurm \
  --wrap "exec $(printf '%q ' "$binary" "$@" "--gtest_output=xml:$report")" >"$ids" &
sbatch_pid=$!
wait "$sbatch_pid"
rc=$?
sbatch_pid=
cat "$out"
echo "[steps run: sbatch --wait exited with $rc]"
keep=()
[ -n "${FIBERTEST_RESULTS_DIR:-}" ] && keep=("$FIBERTEST_RESULTS_DIR/$(basename "$binary")--slurm-steps--$$-$(date +%s%N).xml")
python3 "$here/../gtest_verdict.py" "$report" "$rc" "${keep[@]}"
