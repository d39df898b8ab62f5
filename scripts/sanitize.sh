#!/usr/bin/env bash
# Builds fiber and its tests under a sanitizer in a tree of its own and runs the tests of the
# given ctest labels (default: unit|local; add docker, slurm or kubernetes with their engines
# started):
#   address  AddressSanitizer with UndefinedBehaviorSanitizer, in ./build-asan
#   thread   ThreadSanitizer, in ./build-tsan
# Fails on any sanitizer report in the tests' output, a worker's included: a pool replaces a
# worker that a report ended, so the test around it may still pass.
#
#   scripts/sanitize.sh                         # address: unit and local tests
#   scripts/sanitize.sh thread                  # ThreadSanitizer: unit and local tests
#   scripts/sanitize.sh address 'docker|slurm'  # after scripts/engines.sh start docker slurm
set -euo pipefail
cd "$(dirname "$0")/.."
kind=address
case "${1:-}" in
  address | thread) kind=$1; shift ;;
  undefined) echo "sanitize: UndefinedBehaviorSanitizer runs with address: scripts/sanitize.sh address" >&2; exit 2 ;;
esac
labels=${1:-unit|local}
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-6G}  # the same bound as scripts/build.sh: one store
if [[ $kind == address ]]; then
  dir=build-asan
  flags="-fsanitize=address,undefined -fno-omit-frame-pointer"
  # The same options as fiber's processes build in (src/runtime/init.cpp), for the binaries that
  # do not start fiber's runtime (the `fiber` command).
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:alloc_dealloc_mismatch=0}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
  reports='ERROR: AddressSanitizer|runtime error:'
else
  dir=build-tsan
  flags="-fsanitize=thread -fno-omit-frame-pointer"
  export TSAN_OPTIONS=${TSAN_OPTIONS:-second_deadlock_stack=1 suppressions=$PWD/scripts/tsan.supp}
  reports='WARNING: ThreadSanitizer|ERROR: ThreadSanitizer'
fi
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="${flags% -fno-omit-frame-pointer}" -DCMAKE_SHARED_LINKER_FLAGS="${flags% -fno-omit-frame-pointer}" >/dev/null
cmake --build "$dir" --parallel "$(nproc)"
# Left out, each for what the sanitizer changes rather than for what it finds:
# - limits on a child's address space or memory: a sanitizer's shadow memory is terabytes of
#   address space, so such a child cannot start;
# - what fiber's malloc settings keep after a free: the sanitizers have their own allocators;
# - the installed package's consumers (and the Debian package's), built without the sanitizer's
#   runtime.
skip='child_config_follows_a_non_default_parent_config|allocating_past_its_memory_limit|a_childs_resources_and_placement_are_recorded|keep_freed_memory|find_package_consumer|pkg_config_consumer|deb_package'
status=0
(cd "$dir" && ctest -L "$labels" -E "$skip" -j"$(nproc)" --timeout 600) || status=$?
if grep -Eq "$reports" "$dir"/Testing/Temporary/LastTest.log; then
  echo "sanitize: $kind sanitizer reports:" >&2
  grep -E -A14 "$reports" "$dir"/Testing/Temporary/LastTest.log | head -120 >&2
  exit 1
fi
exit "$status"
