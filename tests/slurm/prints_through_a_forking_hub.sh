#!/usr/bin/env bash
# Runs a program whose one child prints one line ($1, the program; $2, the line) on the test
# cluster, its children forked by the nodes' host hubs (remote_transport=hub, hub_workers=fork),
# and checks that the program succeeds and that the line reaches its stdout: the child writes to
# its hub's job output, which the master passes on, the last of it when it cancels the hub.
# 77 (skipped) when no test cluster answers and engines are not required.
set -uo pipefail
: "${SLURM_CONF:=$(cd "$(dirname "$0")/../.." && pwd)/build/engines/slurm/slurm.conf}"
export SLURM_CONF FIBER_BACKEND=slurm FIBER_REMOTE_TRANSPORT=hub FIBER_HUB_WORKERS=fork
required() {
  local v=${FIBER_REQUIRE_ENGINES-${CI-}}
  [ -n "$v" ] && [ "$v" != 0 ] && [ "$v" != false ]
}
if ! sinfo -h -o %T 2>/dev/null | grep -qE 'idle|mix|alloc'; then
  echo "no Slurm cluster answers (SLURM_CONF=$SLURM_CONF; scripts/engines.sh start slurm brings one up)"
  required && exit 1
  exit 77
fi
out=$("$1")
code=$?
printf '%s\n' "$out"
[ "$code" = 0 ] || { echo "the program exited with $code"; exit 1; }
[ "$out" = "$2" ] || { echo "expected exactly: $2"; exit 1; }
