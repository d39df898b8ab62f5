#!/usr/bin/env bash
# README command 2: set up, build everything (whatever build/ held before), start the engines the
# tests use, run the whole suite, say which tests skipped and why, and stop what it started.
# Under CI (or FIBER_REQUIRE_ENGINES=1) an engine that cannot be had fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build
# Each step's start, in seconds since this one's: where a slow run spent its time.
phase() { echo "test: [$SECONDS s] $*"; }
# What the suite needs only later runs beside the rest at a low CPU priority: it takes what the
# foreground leaves (links, downloads, tests that wait on an engine). The Kubernetes test cluster's
# binaries (built from source, tens of minutes cold) are needed by the last tests; the Clang trees
# after all of them. Each runs in a process group of its own, so that a run cut short stops it all.
background=()
stop_background() { for pid in "${background[@]}"; do kill -- "-$pid" 2>/dev/null || true; done; }
trap stop_background EXIT
in_background() {  # niceness, log, command...
  local niceness=$1 log=$2
  shift 2
  setsid nice -n "$niceness" "$@" >"$log" 2>&1 &
  background+=("$!")
}
# Kubernetes first among them (the tests need it sooner than the Clang trees).
in_background 10 build/kubernetes-build.log scripts/kubernetes_build.sh
kubernetes_build=$!
phase "setup"
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
# For all three trees: the library compiled in batches (a third of the time cold), and mold, which
# links the trees' two hundred programs each in a fifth of ld's time (setup.sh installs it).
common=(-DFIBER_UNITY_BUILD=ON)
command -v mold >/dev/null && common+=(-DFIBER_LINKER=mold)
phase "GCC's tree"
# Every option the suite relies on, given explicitly: build/ may hold a cache configured
# otherwise (README command 1 turns the tests off).
# The library and the fiber command build without a warning (-Wall -Wextra), and stay so. The
# tests' own sources at -O1: three quarters of -O2's compile (a test's compile is mostly optimizing
# the templates it instantiates), against the library at -O2 as users build it.
scripts/build.sh -DFIBER_BUILD_TESTS=ON -DFIBER_BUILD_EXAMPLES=ON -DFIBER_BUILD_BENCH=ON -DBUILD_TESTING=ON -DFIBER_WERROR=ON \
  -DFIBER_DEBUG_INFO=lines -DFIBER_TEST_CXX_FLAGS=-O1 "${common[@]}" "${cuda[@]}"
if [ -n "${CI:-}" ] && [ "${FIBER_WITH_CUDA:-AUTO}" != OFF ] && [ ! -x build/examples/gpu_matmul ]; then
  echo "test: CI builds the GPU examples in every run, and build/examples/gpu_matmul is missing"
  exit 1
fi
# The second and third configurations (Clang on libstdc++ with the shared library and its unit and
# local tests; Clang on libc++) build while the engines' tests run.
in_background 19 build/clang-build.log scripts/build_clang.sh "${common[@]}"
clang_build=$!
trap 'scripts/engines.sh stop; stop_background' EXIT
phase "engines"
scripts/engines.sh start docker registry slurm
results="$PWD/build/ctest-junit.xml"
kube_results="$PWD/build/ctest-junit-kubernetes.xml"
entries="$PWD/build/ctest-tests.json"
# Every gtest binary keeps its XML report here (tests/test_main.cpp), and the whole-binary
# runners theirs (tests/gtest_verdict.py): test_summary.py checks that each entry that passed ran a test.
export FIBERTEST_RESULTS_DIR="$PWD/build/test-results"
rm -rf "$results" "$kube_results" "$FIBERTEST_RESULTS_DIR"
mkdir -p "$FIBERTEST_RESULTS_DIR"
(cd build && ctest --show-only=json-v1 >"$entries")
rc=0
phase "the suite but Kubernetes"
(cd build && ctest -LE kubernetes --output-on-failure --no-tests=error --timeout 300 -j "$(nproc)" --output-junit "$results") || rc=$?
# Kubernetes last: its cluster starts once its binaries are built (waited for here if they are not).
phase "waiting for Kubernetes' build"
wait "$kubernetes_build" || echo "test: the Kubernetes build in the background failed (build/kubernetes-build.log); engines.sh tries again"
scripts/engines.sh start kubernetes || rc=1  # its suites then skip, which the summary fails under CI
phase "Kubernetes' suites"
(cd build && ctest -L kubernetes --output-on-failure --no-tests=error --timeout 300 -j "$(nproc)" --output-junit "$kube_results") || rc=$?
scripts/engines.sh stop
trap stop_background EXIT
clang_rc=0
phase "waiting for the Clang trees"
if ! wait "$clang_build"; then
  echo "test: the Clang trees did not build:"
  tail -50 build/clang-build.log
  clang_rc=1
else
  phase "Clang's unit and local tests"
  (cd build-clang && ctest -L 'unit|local' --output-on-failure --no-tests=error --timeout 300 -j "$(nproc)") || clang_rc=$?
  echo "test: Clang, shared library: unit and local tests $([ "$clang_rc" -eq 0 ] && echo passed || echo FAILED)"
  if build-libcxx/examples/pi_estimation >build-libcxx/pi.out 2>&1 && grep -q "^Pi is roughly 3.14" build-libcxx/pi.out; then
    echo "test: Clang, libc++: the library, the command and the examples built; pi ran"
  else
    echo "test: Clang, libc++: the pi example FAILED:"
    cat build-libcxx/pi.out
    clang_rc=1
  fi
fi
phase "summary"
all_results=$results
[ -f "$kube_results" ] && all_results="$results,$kube_results"
if [ -f "$results" ]; then
  python3 scripts/test_summary.py "$all_results" "$entries" "$FIBERTEST_RESULTS_DIR" || rc=1
else
  echo "no test results were written ($results)"
  rc=1
fi
[ "$clang_rc" -eq 0 ] || rc=1
exit "$rc"
