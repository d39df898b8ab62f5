// How a pool's workers are started, on its own, with a context of this process and no child
// started: each worker named and given its needs, starts at once limited on the local backend, and
// what failed starts mean: a kill from outside or other needs say nothing, three in a row or a
// need no node meets stop the starts until new work tries again, and a handshake starts the count
// over.
#include "primitives/pool/worker_starter.hpp"

#include <gtest/gtest.h>

#include <csignal>

#include <fiber/fiber.hpp>

#include "fiber/error.hpp"
#include "primitives/child_process.hpp"

namespace {
using namespace fiber::detail;
using verdict = worker_starter::verdict;

struct pool_worker_starter : ::testing::Test {
  fiber::context ctx;
  fiber::pool_options options{.processes = 2};
  worker_starter starter{*ctx.runtime(), 7, options};
  std::error_code failed_spawn = make_error_code(fiber::errc::spawn_failed);
};

TEST_F(pool_worker_starter, each_worker_is_named_in_turn_with_the_needs_it_starts_with) {
  auto first = starter.make({2, 0, 0});
  auto second = starter.make({1, 0, 0});
  EXPECT_EQ(first->name(), "PoolWorker-7-1");
  EXPECT_EQ(second->name(), "PoolWorker-7-2");
  EXPECT_EQ(first->state(), child_process::phase::created);  // made, not started
  EXPECT_EQ(starter.made(), 2u);
  EXPECT_EQ(starter.limit(), static_cast<std::size_t>(std::max(16, 4 * fiber::cpu_count())));  // local
}

TEST_F(pool_worker_starter, three_failures_in_a_row_stop_the_starts_until_new_work_tries_again) {
  EXPECT_EQ(starter.failed(true, failed_spawn, "exec failed", 1), verdict::try_next);
  EXPECT_EQ(starter.failed(true, failed_spawn, "exec failed", 1), verdict::try_next);
  EXPECT_EQ(starter.failed(true, failed_spawn, "exec failed", 1), verdict::give_up);
  starter.stop();
  EXPECT_TRUE(starter.stopped());
  EXPECT_TRUE(starter.try_again());
  EXPECT_FALSE(starter.stopped());
  EXPECT_FALSE(starter.try_again());  // they could start: nothing to try again
  EXPECT_EQ(starter.failed(true, failed_spawn, "exec failed", 1), verdict::try_next);  // counted from nothing
}

TEST_F(pool_worker_starter, a_handshake_starts_the_count_over) {
  (void)starter.failed(true, failed_spawn, "exec failed", 1);
  (void)starter.failed(true, failed_spawn, "exec failed", 1);
  starter.start_over();
  EXPECT_EQ(starter.failed(true, failed_spawn, "exec failed", 1), verdict::try_next);
}

TEST_F(pool_worker_starter, a_kill_from_outside_or_other_needs_say_nothing_and_a_need_no_node_meets_ends_it_at_once) {
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(starter.failed(true, failed_spawn, "killed", -SIGKILL), verdict::ignore);
    EXPECT_EQ(starter.failed(true, failed_spawn, "killed", -SIGTERM), verdict::ignore);
    EXPECT_EQ(starter.failed(false, failed_spawn, "started before a raise", 1), verdict::ignore);
  }
  EXPECT_EQ(starter.failed(true, make_error_code(fiber::errc::unsatisfiable), "no node has 9 GPUs", std::nullopt),
            verdict::give_up);
}

}  // namespace
