// A call's time request on its own: what a call whose items take an estimate makes of a worker
// with so much time left before its engine ends it, and of one that had less at its start; the
// error that names both and the fix. (The pool's use of it, on Slurm workers with a time limit, is
// pool_time_request_test's.)
#include "primitives/pool/time_request.hpp"

#include <gtest/gtest.h>

namespace {
using namespace fiber::detail;
using namespace std::chrono_literals;
using fit = time_request::fit;

TEST(time_request, a_worker_with_the_time_or_with_no_planned_end_takes_the_items) {
  EXPECT_EQ(time_request::judge(100s, 120s, false, 100s), fit::fits);          // just enough
  EXPECT_EQ(time_request::judge(std::nullopt, std::nullopt, false, 1h), fit::fits);  // no end planned
  EXPECT_EQ(time_request::judge(1s, 120s, false, 0ms), fit::fits);             // no estimate: not looked at
}

TEST(time_request, one_without_the_time_finishes_what_it_holds_or_leaves_for_a_replacement) {
  EXPECT_EQ(time_request::judge(90s, 120s, true, 100s), fit::finishing);
  EXPECT_EQ(time_request::judge(90s, 120s, false, 100s), fit::retire);
  EXPECT_EQ(time_request::judge(90s, std::nullopt, false, 100s), fit::retire);  // taken up: its start is unknown
}

TEST(time_request, a_worker_that_lacked_the_time_at_its_start_says_no_new_one_would_have_it) {
  EXPECT_EQ(time_request::judge(50s, 58s, false, 100s), fit::never);
  EXPECT_EQ(time_request::judge(50s, 58s, true, 100s), fit::never);
  auto why = time_request::too_long("PoolWorker-1-3", 58s + 900ms, 99500ms);
  for (auto words : {"100 s", "task_estimate", "PoolWorker-1-3", "58 s", "slurm_time_limit"})
    EXPECT_NE(why.find(words), std::string::npos) << words << " in: " << why;
}

TEST(time_request, a_worker_whose_engine_has_not_said_an_end_has_the_time) {
  pool_worker w;  // no process: no engine to ask
  EXPECT_FALSE(time_request::time_left(w, time_request::clock::now()));
  EXPECT_TRUE(time_request::has_time(w, 1h, time_request::clock::now()));
}

}  // namespace
