// What `fiber ps` says of a run whose master its engine starts again (cli/run_standing.hpp).
#include "cli/run_standing.hpp"

#include <gtest/gtest.h>

namespace {
using fiber::cli::run_state;
using fiber::cli::with_restarts;

TEST(run_standing, a_master_that_died_and_waits_to_start_again_is_resuming) {
  EXPECT_EQ(run_state("PENDING", 1, true), "resuming");
  EXPECT_EQ(run_state("restarting", 2, true), "resuming");
}

TEST(run_standing, a_first_start_waiting_or_a_restarted_master_running_keeps_the_engines_word) {
  EXPECT_EQ(run_state("PENDING", 0, true), "PENDING") << "a first start that pends is not resuming";
  EXPECT_EQ(run_state("running", 1, false), "running");
}

TEST(run_standing, restarts_are_counted_beside_what_the_engine_says) {
  EXPECT_EQ(with_restarts("", 0), "");
  EXPECT_EQ(with_restarts("Up 3 seconds", 0), "Up 3 seconds");
  EXPECT_EQ(with_restarts("", 1), "restart 1");
  EXPECT_EQ(with_restarts("BeginTime", 2), "BeginTime, restart 2");
}

}  // namespace
