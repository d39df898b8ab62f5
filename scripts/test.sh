#!/usr/bin/env bash
# README command 2: set up, build, and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
cd build
ctest --output-on-failure --timeout 300 -j "$(nproc)"
