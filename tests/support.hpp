// Shared test helpers.
#pragma once
#include <fiber/error.hpp>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include <string>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string_view>

#include "proc_children.hpp"
#include "run_folder.hpp"

namespace fiber_test {

/// The kernel's count of OOM kills on this host (all of it: any tenant's too), from /proc/vmstat;
/// -1 where the kernel does not say.
inline long oom_kills() {
  std::ifstream vmstat("/proc/vmstat");
  std::string key;
  long value = 0;
  while (vmstat >> key >> value)
    if (key == "oom_kill") return value;
  return -1;
}
/// The backend this run starts children with (FIBERTEST_BACKEND; see test_main.cpp).
inline std::string_view backend_under_test() {
  const char* b = std::getenv("FIBER_BACKEND");
  return b && *b ? std::string_view(b) : std::string_view("local");
}
/// Children are containers (FIBERTEST_BACKEND=docker).
inline bool on_docker() { return backend_under_test() == "docker"; }
/// Children are Slurm jobs or steps (FIBERTEST_BACKEND=slurm).
inline bool on_slurm() { return backend_under_test() == "slurm"; }
/// Children are pods of the Kubernetes test cluster (FIBERTEST_BACKEND=kubernetes).
inline bool on_kubernetes() { return backend_under_test() == "kubernetes"; }
/// Skips a test about what only the local backend has (its children are this process's
/// children, share its pid namespace, its fork server, ...).
#define FIBER_TEST_LOCAL_ONLY(why) \
  if (::fiber_test::backend_under_test() != "local") FIBER_TEST_BACKEND_GATED("local backend only: " << why)

/// Skips a case that does not apply to the backend (or the runner) this suite runs on. The words
/// "backend-gated:" start the reason: scripts/test_summary.py groups skips by reason, and under CI
/// a skip that is neither backend-gated nor "no GPU" fails the run (an engine or tool that should
/// have been there).
#define FIBER_TEST_BACKEND_GATED(why) GTEST_SKIP() << "backend-gated: " << why

/// Engines are required (a missing one fails the test instead of skipping it) under CI
/// (`CI` set) or with FIBER_REQUIRE_ENGINES=1; FIBER_REQUIRE_ENGINES=0 lets them skip under CI too.
inline bool engines_required() {
  auto on = [](const char* v) { return v && *v && std::string_view(v) != "0" && std::string_view(v) != "false"; };
  if (const char* r = std::getenv("FIBER_REQUIRE_ENGINES")) return on(r);
  return on(std::getenv("CI"));
}
/// Ends the test process with exit code 1 and the reason, under CI and outside it: for a global
/// environment's set-up that fails once its engine was found (fiber's own code failed), where
/// GTEST_FAIL would be followed by "[  SKIPPED ]" for every test and counted as skips.
#define FIBER_TEST_SETUP_FAILED(why)                                            \
  do {                                                                          \
    std::ostringstream fiber_test_failed_;                                      \
    fiber_test_failed_ << why;                                                  \
    std::fprintf(stderr, "FAILED: %s\n", fiber_test_failed_.str().c_str());    \
    std::fflush(nullptr);                                                       \
    std::_Exit(1);                                                              \
  } while (0)

/// Leaves the current test (or environment) because engine `engine` cannot be had: when engines
/// are required, the test process ends with exit code 1 and the reason (FIBER_TEST_SETUP_FAILED);
/// else a skip that says why. Not GTEST_FAIL: in a global environment a failure is followed by
/// "[  SKIPPED ]" for every test, which ctest's skip pattern counts as skipped, and a required
/// engine that was down went unseen (a CI run reported 42 Slurm tests skipped while their nodes
/// were "completing").
#define FIBER_TEST_ENGINE_MISSING(engine, why)                                                      \
  do {                                                                                              \
    if (::fiber_test::engines_required())                                                           \
      FIBER_TEST_SETUP_FAILED("no " << (engine) << " engine, and engines are required here (CI or " \
                              << "FIBER_REQUIRE_ENGINES=1): " << (why)                              \
                              << " (scripts/engines.sh start brings one up)");                      \
    GTEST_SKIP() << "no " << (engine) << " engine here: " << (why);                                 \
  } while (0)

/// Runs `f` on a new thread and returns once that thread has ended, in the kernel too (its task
/// is gone from /proc/self/task, so whatever its end sets off, a parent-death signal say, has been
/// sent).
template <class F>
void run_on_a_thread_that_ends(F&& f) {
  pid_t tid = 0;
  std::thread([&] {
    tid = static_cast<pid_t>(::gettid());
    f();
  }).join();
  auto task = "/proc/self/task/" + std::to_string(tid);
  while (::access(task.c_str(), F_OK) == 0) std::this_thread::yield();
}

/// Runs `f`, which must throw fiber::error with `code` and a message containing each of `mentions`.
template <class F>
void expect_error(F&& f, fiber::errc code, std::initializer_list<std::string_view> mentions) {
  try {
    f();
    ADD_FAILURE() << "expected fiber::error " << fiber::make_error_code(code).message();
  } catch (const fiber::error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (auto m : mentions) EXPECT_NE(std::string_view(e.what()).find(m), std::string_view::npos) << e.what();
  }
}
template <class F>
void expect_error(F&& f, fiber::errc code, std::string_view mentions = "") {
  expect_error(std::forward<F>(f), code, {mentions});
}
}  // namespace fiber_test
