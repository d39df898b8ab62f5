#!/usr/bin/env bash
# README command 2: set up, build everything (whatever build/ held before), start the engines the
# tests use, run the whole suite, say which tests skipped and why, and stop what it started.
# Under CI (or FIBER_REQUIRE_ENGINES=1) an engine that cannot be had fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# The dashboard's page is tested in Debian's headless Chromium (tests/dashboard_browser_test.cpp).
if ! command -v chromium >/dev/null; then
  echo "test: installing chromium (the dashboard's browser test)"
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends chromium >/dev/null
fi
# Traces are tested in Perfetto's own UI (tests/perfetto_trace_test.cpp): its pinned build, fetched once.
scripts/perfetto_ui.sh >/dev/null
# The GPU examples are built in every run: with this machine's CUDA, else with NVIDIA's compiler
# wheels cached outside the clone (scripts/cuda_toolkit.sh says which).
cuda_args=$(scripts/cuda_toolkit.sh)
read -r -a cuda <<<"$cuda_args"
# Every option the suite relies on, given explicitly: build/ may hold a cache configured
# otherwise (README command 1 turns the tests off).
# The library and the fiber command build without a warning (-Wall -Wextra), and stay so.
scripts/build.sh -DFIBER_BUILD_TESTS=ON -DFIBER_BUILD_EXAMPLES=ON -DFIBER_BUILD_BENCH=ON -DBUILD_TESTING=ON -DFIBER_WERROR=ON \
  -DFIBER_DEBUG_INFO=lines "${cuda[@]}"
if [ -n "${CI:-}" ] && [ "${FIBER_WITH_CUDA:-AUTO}" != OFF ] && [ ! -x build/examples/gpu_matmul ]; then
  echo "test: CI builds the GPU examples in every run, and build/examples/gpu_matmul is missing"
  exit 1
fi
# The second configuration, before the engines start: Clang 16 with libfiber as a shared library
# (a program sees what the headers mark FIBER_API), its examples, and its unit and local tests
# (build-clang/; the tests of the library's parts link the same objects as a static archive).
BUILD_DIR=build-clang scripts/build.sh -DCMAKE_CXX_COMPILER=clang++-16 -DBUILD_SHARED_LIBS=ON -DFIBER_BUILD_TESTS=ON \
  -DFIBER_BUILD_EXAMPLES=ON -DFIBER_BUILD_BENCH=OFF -DBUILD_TESTING=ON -DFIBER_WERROR=ON -DFIBER_DEBUG_INFO=lines \
  -DFIBER_WITH_CUDA=OFF
clang_rc=0
(cd build-clang && ctest -L 'unit|local' --output-on-failure --no-tests=error --timeout 300 -j "$(nproc)") || clang_rc=$?
echo "test: Clang, shared library: unit and local tests $([ "$clang_rc" -eq 0 ] && echo passed || echo FAILED)"
# The third: Clang 16 on libc++ (build-libcxx/): the library, the fiber command and the examples
# build, and the pi example runs on the local backend. (The tests would need a GoogleTest built
# against libc++, which Debian does not package.)
libcxx=-stdlib=libc++
BUILD_DIR=build-libcxx scripts/build.sh -DCMAKE_CXX_COMPILER=clang++-16 -DCMAKE_CXX_FLAGS="$libcxx" \
  -DCMAKE_EXE_LINKER_FLAGS="$libcxx" -DCMAKE_SHARED_LINKER_FLAGS="$libcxx" -DFIBER_BUILD_TESTS=OFF \
  -DFIBER_BUILD_EXAMPLES=ON -DFIBER_BUILD_BENCH=OFF -DBUILD_TESTING=OFF -DFIBER_WERROR=ON -DFIBER_WITH_CUDA=OFF
if build-libcxx/examples/pi_estimation >build-libcxx/pi.out 2>&1 && grep -q "^Pi is roughly 3.14" build-libcxx/pi.out; then
  echo "test: Clang, libc++: the library, the command and the examples built; pi ran"
else
  echo "test: Clang, libc++: the pi example FAILED:"
  cat build-libcxx/pi.out
  clang_rc=1
fi
trap 'scripts/engines.sh stop' EXIT
scripts/engines.sh start
results="$PWD/build/ctest-junit.xml"
entries="$PWD/build/ctest-tests.json"
# Every gtest binary keeps its XML report here (tests/test_main.cpp), and the whole-binary
# runners theirs (tests/gtest_verdict.py): test_summary.py checks that each entry that passed ran a test.
export FIBERTEST_RESULTS_DIR="$PWD/build/test-results"
rm -rf "$results" "$FIBERTEST_RESULTS_DIR"
mkdir -p "$FIBERTEST_RESULTS_DIR"
(cd build && ctest --show-only=json-v1 >"$entries")
rc=0
(cd build && ctest --output-on-failure --no-tests=error --timeout 300 -j "$(nproc)" --output-junit "$results") || rc=$?
scripts/engines.sh stop
trap - EXIT
if [ -f "$results" ]; then
  python3 scripts/test_summary.py "$results" "$entries" "$FIBERTEST_RESULTS_DIR" || rc=1
else
  echo "no test results were written ($results)"
  rc=1
fi
[ "$clang_rc" -eq 0 ] || rc=1
exit "$rc"
