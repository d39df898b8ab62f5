#!/usr/bin/env bash
# Runs a GPU example and judges what it printed by whether this machine has an NVIDIA GPU, as its
# driver says (nvidia-smi, or the kernel module's /proc/driver/nvidia/gpus), never as fiber says:
# a GPU path that breaks on a machine with a GPU must fail, not pass as "no GPU here".
#
#   by_driver.sh WITH_GPU WITHOUT_GPU BINARY [ARGS...]
#
# WITH_GPU: the extended regular expression the output must match where a GPU is present.
# WITHOUT_GPU: the one it must match where none is; the word `skip` instead means the example must
# say it needs a GPU (its own words, "needs a GPU and none can be had here"), and the test is then
# reported skipped (exit 77) with the reason "no GPU".
set -uo pipefail
with_gpu=$1 without_gpu=$2
shift 2

gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
fi
if [ "$gpus" = 0 ] && [ -d /proc/driver/nvidia/gpus ]; then
  gpus=$(find /proc/driver/nvidia/gpus -mindepth 1 -maxdepth 1 | wc -l)
fi

out=$("$@" 2>&1)
rc=$?
printf '%s\n[%s exited with %d]\n' "$out" "$(basename "$1")" "$rc"
if [ "$gpus" != 0 ]; then
  if [ "$rc" = 0 ] && grep -Eq -- "$with_gpu" <<<"$out"; then
    echo "[by_driver: $gpus GPU(s) here, and the example said what a working GPU path says]"
    exit 0
  fi
  echo "[by_driver: FAILED: the driver reports $gpus GPU(s), so the output must match: $with_gpu]"
  exit 1
fi
if [ "$without_gpu" = skip ]; then
  if [ "$rc" = 0 ] && grep -q -- "needs a GPU and none can be had here" <<<"$out"; then
    echo "no GPU: neither nvidia-smi nor /proc/driver/nvidia reports one on this machine"
    exit 77
  fi
  echo "[by_driver: FAILED: no GPU here, and the example did not say that it needs one]"
  exit 1
fi
if grep -Eq -- "$without_gpu" <<<"$out"; then
  echo "[by_driver: no GPU here, and the example said what a machine without one must say]"
  exit 0
fi
echo "[by_driver: FAILED: no GPU here, so the output must match: $without_gpu]"
exit 1
