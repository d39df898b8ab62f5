#!/usr/bin/env bash
# Runs a program whose one child prints one line ($1, the program; $2, the line) on the test
# cluster, its children forked by the nodes' host hubs (remote_transport=hub, hub_workers=fork),
# and checks that the program succeeds and that the line reaches its stdout: the child writes to
# its hub's job output, which the master passes on, the last of it when it cancels the hub.
# 77 (skipped) when no test cluster answers and engines are not required.
set -uo pipefail
source "$(dirname "$0")/test_cluster.sh"
export FIBER_BACKEND=slurm FIBER_REMOTE_TRANSPORT=hub FIBER_HUB_WORKERS=fork
out=$("$1")
code=$?
printf '%s\n' "$out"
[ "$code" = 0 ] || { echo "the program exited with $code"; exit 1; }
[ "$out" = "$2" ] || { echo "expected exactly: $2"; exit 1; }
