#!/usr/bin/env bash
# A/B of settings with one binary, alternating, so the VM's drift hits each alike: the pool's
# overhead per task at D=0 (W=2, W=4) and the simple_queue round trip, per round and setting.
# Usage: bench/compare/spin_ab.sh [build-dir] rounds "VAR=value ..." "VAR=value ..." ...
# e.g.   bench/compare/spin_ab.sh build 3 FIBER_WAIT_SPIN_US=0 FIBER_WAIT_SPIN_US=50
set -uo pipefail
build=${1:-build}
rounds=${2:-3}
shift 2
for _ in $(seq "$rounds"); do
  for setting in "$@"; do
    # shellcheck disable=SC2086  # a setting may hold several VAR=value words
    pool=$(env $setting "$build/bench/pool_bench" --benchmark_filter='pool_overhead/W:(2|4)/D_us:0/' 2>&1 |
      grep median | sed -E 's/.*W:([0-9]).*ovh_cal_us=([0-9.]+).*/W=\1 D=0: \2 us\/task/' | tr '\n' ' ')
    # shellcheck disable=SC2086
    queue=$(env $setting "$build/bench/queue_bench" --benchmark_filter='simple_queue_rtt' 2>&1 | grep median | awk '{print $2}')
    echo "[$setting] $pool queue rtt: $queue us"
  done
done
