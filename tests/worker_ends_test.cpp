// How a pool's worker ended, in the pool's words, on its own: a worker that said it drains, or
// whose exit says so (exit_drained), handed its work back; a memory stop says its limit; an end
// the pool chose says why with the status it saw, unless the worker had ended by itself first.
// (What the pool counts of each end, with processes, is the pool tests'.)
#include "primitives/pool/worker_ends.hpp"

#include <gtest/gtest.h>

#include <csignal>

#include "core/worker_env.hpp"
#include "primitives/child_ending.hpp"

namespace {
using namespace fiber::detail;

/// A child's ending once it exited with `code` (-N: signal N).
struct exited_with : child_ending {
  explicit exited_with(int code) { exited(code); }
};

TEST(worker_ends, a_worker_that_said_it_drains_or_exits_so_handed_its_work_back) {
  child_ending running;  // no exit seen yet
  EXPECT_TRUE(handed_back(true, running));
  EXPECT_TRUE(handed_back(false, exited_with(exit_drained)));
  EXPECT_FALSE(handed_back(false, exited_with(0)));
  EXPECT_FALSE(handed_back(false, exited_with(-SIGTERM)));
  EXPECT_EQ(how_it_ended(false, exited_with(exit_drained), ""),
            "drained: it had notice of its planned end and handed its work back");
}

TEST(worker_ends, an_end_reads_as_its_status_or_its_memory_stop) {
  EXPECT_EQ(how_it_ended(false, exited_with(-SIGKILL), ""), "signal 9");
  EXPECT_EQ(how_it_ended(false, exited_with(3), ""), "exit code 3");
  EXPECT_EQ(how_it_ended(false, child_ending{}, ""), "its end was reported without a status");
  auto stopped = exited_with(-SIGKILL);
  stopped.went_past_memory({.limit_mb = 256, .peak_mb = 301});
  EXPECT_EQ(how_it_ended(false, stopped, ""), "stopped for going past its memory limit (256 MiB; peak 301 MiB)");
}

TEST(worker_ends, an_end_the_pool_chose_says_why_unless_the_worker_had_ended_by_itself) {
  EXPECT_EQ(how_it_ended(false, exited_with(-SIGKILL), "it stopped answering"), "it stopped answering (signal 9)");
  EXPECT_EQ(how_it_ended(false, exited_with(-SIGTERM), "it stopped answering"), "it stopped answering (signal 15)");
  EXPECT_EQ(how_it_ended(false, exited_with(-SIGSEGV), "it stopped answering"), "signal 11");  // it crashed first
}

}  // namespace
