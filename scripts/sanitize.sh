#!/usr/bin/env bash
# Builds fiber and its tests with AddressSanitizer in ./build-asan (or the folder given second)
# and runs the tests of the given ctest labels (default: unit|local; add docker, slurm or
# kubernetes with their engines started).
# Fails on any sanitizer report in the tests' output, a worker's included: a pool replaces a
# worker that a report ended, so the test around it may still pass.
#
#   scripts/sanitize.sh                 # unit and local tests
#   scripts/sanitize.sh 'docker|slurm'  # after scripts/engines.sh start docker slurm
set -euo pipefail
cd "$(dirname "$0")/.."
labels=${1:-unit|local}
dir=${2:-build-asan}  # (not a FIBER_ variable: fiber reads those as config keys)
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-2G}
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS="-fsanitize=address -fno-omit-frame-pointer" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address" >/dev/null
cmake --build "$dir" --parallel "$(nproc)"
# Left out, each for what the sanitizer changes rather than for what it finds:
# - limits on a child's address space or memory: ASan's shadow memory is terabytes of address
#   space, so such a child cannot start;
# - what fiber's malloc settings keep after a free: ASan has its own allocator;
# - the installed package's consumer, built without the sanitizer's runtime.
skip='child_config_follows_a_non_default_parent_config|allocating_past_its_memory_limit|a_childs_resources_and_placement_are_recorded|keep_freed_memory|find_package_consumer'
# The same options as fiber's processes build in (src/runtime/init.cpp), for the binaries that
# do not start fiber's runtime (the `fiber` command).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:alloc_dealloc_mismatch=0}
status=0
(cd "$dir" && ctest -L "$labels" -E "$skip" -j"$(nproc)" --timeout 600) || status=$?
if grep -q "ERROR: AddressSanitizer" "$dir"/Testing/Temporary/LastTest.log; then
  echo "sanitize: AddressSanitizer reported errors:" >&2
  grep -A12 "ERROR: AddressSanitizer" "$dir"/Testing/Temporary/LastTest.log | head -80 >&2
  exit 1
fi
exit "$status"
