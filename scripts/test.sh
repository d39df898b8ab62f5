#!/usr/bin/env bash
# README command 2: set up, build, start the engines the tests use (a Docker engine), run the
# whole test suite, and stop what it started.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
scripts/engines.sh start
trap 'scripts/engines.sh stop' EXIT
(cd build && ctest --output-on-failure --timeout 300 -j "$(nproc)")
