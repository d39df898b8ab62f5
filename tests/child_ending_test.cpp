// How a child ended, on its own: the exit code only once it exited, what it raised only once it
// ended, a kill's reason, and the waiters run once (those added after the end at once).
#include "primitives/child_ending.hpp"

#include <gtest/gtest.h>

#include <csignal>

#include "core/remote_failure.hpp"

namespace {
using fiber::detail::child_ending;

TEST(child_ending, the_exit_code_comes_with_the_exit_and_what_it_raised_with_the_end) {
  child_ending e;
  EXPECT_FALSE(e.exit_code());
  fiber::detail::remote_failure f;
  f.type = "std::runtime_error";
  f.message = "no luck";
  e.heard_done(true, f.encode(), "Process-3");
  EXPECT_TRUE(e.done_heard());
  EXPECT_FALSE(e.raised());  // not ended yet: a reader could see it half written
  e.exited(1);
  EXPECT_EQ(e.exit_code(), 1);
  (void)e.end();
  ASSERT_TRUE(e.raised());
  EXPECT_EQ(e.raised()->type(), "std::runtime_error");
  EXPECT_NE(std::string(e.raised()->what()).find("no luck"), std::string::npos);
  EXPECT_TRUE(e.ended_by().empty());
}

TEST(child_ending, a_kill_is_signal_9_with_its_reason) {
  child_ending e;
  e.killed("ended by its pool (terminate)");
  EXPECT_EQ(e.exit_code(), -SIGKILL);
  EXPECT_EQ(e.ended_by(), "ended by its pool (terminate)");
  EXPECT_FALSE(e.done_heard());
}

TEST(child_ending, waiters_run_once_after_the_end_and_a_late_one_at_once) {
  child_ending e;
  int ran = 0;
  e.when_ended([&] { ++ran; });
  e.when_ended([&] { ++ran; });
  EXPECT_EQ(ran, 0);
  auto waiters = e.end();
  EXPECT_EQ(waiters.size(), 2u);
  for (auto& w : waiters) w();
  EXPECT_EQ(ran, 2);
  EXPECT_TRUE(e.end().empty());  // ended once
  e.when_ended([&] { ++ran; });
  EXPECT_EQ(ran, 3);
}

}  // namespace
