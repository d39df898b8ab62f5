#!/usr/bin/env bash
# A local child's start+join from two builds of fiber beside multiprocessing's fork start, in one
# run, three rounds, each side once per round in turn (the machine drifts within minutes):
#   git worktree add /tmp/before <commit> && (cd /tmp/before && scripts/build.sh -DFIBER_BUILD_BENCH=ON)
#   bench/compare/start_ab.sh /tmp/before/build build
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
before=$(cd "${1:?usage: start_ab.sh BEFORE_BUILD AFTER_BUILD}" && pwd) after=$(cd "${2:?usage: start_ab.sh BEFORE_BUILD AFTER_BUILD}" && pwd)
median() { "$1/bench/process_bench" --benchmark_filter=process_start_join --benchmark_report_aggregates_only=true 2>/dev/null | awk '/_median/ {print $2}'; }
for round in 1 2 3; do
  b=$(median "$before") a=$(median "$after")
  mp=$(cd "$here/mp" && python3 process_start.py --one fork 200 | sed -E 's/.*median=([0-9.]+)ms.*/\1/')
  echo "round $round: before $b ms, after $a ms, multiprocessing fork $mp ms: after/before $(python3 -c "print(f'{$a/$b:.2f}')"), after/mp $(python3 -c "print(f'{$a/$mp:.2f}')")"
done
