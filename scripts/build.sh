#!/usr/bin/env bash
# Configures and builds fiber in ./build, or the folder BUILD_DIR names (Release with debug info,
# Ninja); extra arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${BUILD_DIR:-build}  # (not a FIBER_ variable: fiber reads those as config keys)
# A folder configured with another generator cannot be reconfigured with Ninja: start it afresh.
if [ -f "$dir/CMakeCache.txt" ] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$dir/CMakeCache.txt"; then
  echo "build: $dir/ was configured with another generator; configuring it afresh"
  rm -rf "$dir/CMakeCache.txt" "$dir/CMakeFiles"
fi
# ccache keeps its store outside the clone; bounded so that it never crowds the build out.
# The test command's three trees (GCC; Clang; Clang on libc++) fit in it with a sanitizer's.
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-6G}
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$dir" --parallel "$(nproc)"
