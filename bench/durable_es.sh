#!/usr/bin/env bash
# A durable run's journal on a real workload: the evolution-strategies example, run with the
# journal off and on in turns (each on run a fresh run id and journal), PAIRS pairs; prints each
# run's wall time, the medians and on ÷ off.
#   bench/durable_es.sh [PAIRS=5] [GENERATIONS=20] [POPULATION=64] [DIM=100000]
set -euo pipefail
cd "$(dirname "$0")/.."
pairs=${1:-5} gens=${2:-20} pop=${3:-64} dim=${4:-100000}
es=build/examples/evolution_strategies
[ -x "$es" ] || { echo "build $es first (scripts/build.sh -DFIBER_BUILD_EXAMPLES=ON)"; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
run() {  # durable(0|1) tag -> seconds
  local start end
  start=$(date +%s.%N)
  FIBER_RECORD=false FIBER_DURABLE=$1 FIBER_RUN_ID=es-$2 FIBER_JOURNAL_DIR=$dir "$es" "$gens" "$pop" "$dim" >/dev/null 2>&1
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN {printf "%.3f\n", b - a}'
}
off=() on=()
for i in $(seq 1 "$pairs"); do
  off+=("$(run 0 off-$i)")
  on+=("$(run 1 on-$i)")
  echo "pair $i: off ${off[-1]} s, on ${on[-1]} s"
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
m_off=$(median "${off[@]}") m_on=$(median "${on[@]}")
awk -v off="$m_off" -v on="$m_on" 'BEGIN {printf "median off %.3f s, on %.3f s, on / off %.3f\n", off, on, on / off}'
echo "journal bytes of one run: $(stat -c %s "$dir/es-on-1.journal")"
