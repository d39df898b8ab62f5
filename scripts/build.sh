#!/usr/bin/env bash
# Configures and builds fiber in ./build (Release with debug info, Ninja); extra arguments go to
# cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
# A folder configured with another generator cannot be reconfigured with Ninja: start it afresh.
if [ -f build/CMakeCache.txt ] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' build/CMakeCache.txt; then
  echo "build: build/ was configured with another generator; configuring it afresh"
  rm -rf build/CMakeCache.txt build/CMakeFiles
fi
# ccache keeps its store outside the clone; bounded so that it never crowds the build out.
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-2G}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build build --parallel "$(nproc)"
