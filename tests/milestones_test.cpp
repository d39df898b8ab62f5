// Who waits for a pool to be ready and to be joined, on its own: a waiter is called once, when its
// milestone is reached, at once if it was, and a wait begun from a waiter's call is a new one.
#include "primitives/pool/milestones.hpp"

#include <gtest/gtest.h>

#include <string>

namespace {
using fiber::detail::milestones;

TEST(milestones, each_waiter_is_called_once_when_its_milestone_is_reached) {
  bool ready = false, joined = false;
  milestones m([&] { return ready; }, [&] { return joined; });
  std::string calls;
  m.when_ready([&] { calls += "r"; });
  m.when_joined([&] { calls += "j"; });
  m.check();
  EXPECT_EQ(calls, "");
  ready = true;
  m.check();
  m.check();
  EXPECT_EQ(calls, "r");
  joined = true;
  m.check();
  EXPECT_EQ(calls, "rj");
  m.when_ready([&] { calls += "R"; });  // reached already: at once
  EXPECT_EQ(calls, "rjR");
}

TEST(milestones, a_wait_begun_from_a_waiters_call_is_a_new_one_and_no_waiter_runs_twice) {
  bool ready = true;
  milestones m([&] { return ready; }, [] { return false; });
  int calls = 0;
  m.check();
  ready = false;
  m.when_ready([&] { ++calls; });
  ready = true;
  std::function<void()> again = [&] {
    ++calls;
    if (calls < 3) m.when_ready([&] { again(); });
  };
  m.when_ready([&] { again(); });  // reached: both run now, and the second waits again from its call
  EXPECT_EQ(calls, 3) << "each wait from inside a call is a new one, met at once while the milestone holds";
}

}  // namespace
