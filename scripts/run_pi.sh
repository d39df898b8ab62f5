#!/usr/bin/env bash
# README command 1: set up, build, and run the pi-estimation example on the local backend.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh -DFIBER_BUILD_EXAMPLES=ON -DFIBER_BUILD_TESTS=OFF -DFIBER_BUILD_BENCH=OFF
FIBER_BACKEND=local build/examples/pi_estimation
