// What the top master's spawn service starts for the tree (runtime/nested/spawn_policy): the run's own
// program as a worker, fiber's own variables, no deeper than max_depth. Each refusal is what a
// process that got into the tree would ask for.
#include "runtime/nested/spawn_policy.hpp"

#include <gtest/gtest.h>

using fiber::detail::spawn_limits;
using fiber::detail::spawn_refusal;
using fiber::detail::spawn_spec;

namespace {
const spawn_limits limits{"/opt/run/program", 4};

spawn_spec a_worker() {
  spawn_spec s;
  s.name = "Process-1";
  s.executable = "/opt/run/program";
  s.args = {"--fiber-worker"};
  s.env = {{"FIBER_WORKER_TOKEN", "7"}, {"FIBER_WORKER_DEPTH", "2"}};
  return s;
}
}  // namespace

TEST(spawn_policy, the_runs_own_worker_within_max_depth_starts) {
  EXPECT_EQ(spawn_refusal(a_worker(), 2, limits), "");
  EXPECT_EQ(spawn_refusal(a_worker(), 4, limits), "");
}

TEST(spawn_policy, deeper_than_max_depth_is_refused) {
  auto why = spawn_refusal(a_worker(), 5, limits);
  EXPECT_NE(why.find("depth 5"), std::string::npos) << why;
  EXPECT_NE(why.find("max_depth is 4"), std::string::npos) << why;
}

TEST(spawn_policy, another_program_is_refused) {
  auto s = a_worker();
  s.executable = "/bin/sh";
  auto why = spawn_refusal(s, 2, limits);
  EXPECT_NE(why.find("'/bin/sh'"), std::string::npos) << why;
}

TEST(spawn_policy, other_arguments_are_refused) {
  auto s = a_worker();
  s.args = {"--fiber-worker", "-c", "id"};
  EXPECT_NE(spawn_refusal(s, 2, limits), "");
  s.args = {"--fiber-hub"};
  EXPECT_NE(spawn_refusal(s, 2, limits), "");
}

TEST(spawn_policy, variables_that_are_not_fibers_are_refused) {
  for (auto* name : {"LD_PRELOAD", "BASH_ENV", "PATH", "FIBER_WORKER_KEYS", "FIBER_WORKER_KEYS_FILE"}) {
    auto s = a_worker();
    s.env.emplace_back(name, "/tmp/x");
    auto why = spawn_refusal(s, 2, limits);
    EXPECT_NE(why.find(name), std::string::npos) << name << ": " << why;
  }
}

TEST(spawn_policy, a_host_is_the_top_masters_choice) {
  auto s = a_worker();
  s.host = "n2";
  EXPECT_NE(spawn_refusal(s, 2, limits), "");
}
