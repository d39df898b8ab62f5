#!/usr/bin/env bash
# Before/after, interleaved in one run: the same benchmarks (queues, pool, managers, process
# start) from two builds of fiber, e.g. a commit before a restructuring and the tree after it:
#   git worktree add /tmp/before <commit> && (cd /tmp/before && scripts/build.sh)
#   bench/compare/before_after.sh /tmp/before/build build
set -u
before=$(cd "${1:?usage: before_after.sh BEFORE_BUILD AFTER_BUILD}" && pwd)/bench after=$(cd "${2:?usage: before_after.sh BEFORE_BUILD AFTER_BUILD}" && pwd)/bench
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
run() { "$1/$2" --benchmark_filter="$3" --benchmark_report_aggregates_only=true --benchmark_format=json 2>/dev/null; }
for round in 1 2; do
  order="before after"
  [ $round = 2 ] && order="after before"  # the machine drifts within a run: each side goes first once
  for side in $order; do
    dir=$before; [ $side = after ] && dir=$after
    run $dir queue_bench 'rtt_16B|bulk_1MB' > $tmp/ab-$side-queue-$round.json
    run $dir pool_bench 'pool_overhead/W:(2|4)/D_us:(0|1000)/|pool_throughput/W:(2|4)/chunksize:(0|1000)/|pool_start/W:4' > $tmp/ab-$side-pool-$round.json
    run $dir manager_bench 'manager_call_sync|manager_round_async' > $tmp/ab-$side-mgr-$round.json
    run $dir process_bench 'process_start_join' > $tmp/ab-$side-proc-$round.json
  done
done
python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
def load(side, part, rnd):
    out = {}
    for b in json.load(open(f"{tmp}/ab-{side}-{part}-{rnd}.json"))["benchmarks"]:
        if b.get("aggregate_name") == "median":
            key = b["run_name"]
            val = b.get("ovh_cal_us") or b.get("tasks_per_s") or b["real_time"]
            out[key] = (val, "ovh_cal_us" if "ovh_cal_us" in b else "tasks_per_s" if "tasks_per_s" in b else b["time_unit"])
    return out
for part in ("queue", "pool", "mgr", "proc"):
    for rnd in (1, 2):
        b, a = load("before", part, rnd), load("after", part, rnd)
        for k in b:
            if k in a:
                print(f"round {rnd} {k:60s} before {b[k][0]:12.2f} after {a[k][0]:12.2f} {b[k][1]:12s} after/before {a[k][0]/b[k][0]:.2f}")
PY
