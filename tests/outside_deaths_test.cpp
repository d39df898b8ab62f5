// Which ends of a pool's worker its item can have caused (pool/outside_deaths), and the bound on
// deaths from outside in a row: a crash, an exit, a memory stop or an end the pool chose are the
// item's; a SIGKILL or SIGTERM otherwise is not; the budget counts deaths with no item finished
// between, and its error says what happened and what to do.
#include "primitives/pool/outside_deaths.hpp"

#include <gtest/gtest.h>

#include <csignal>

#include "fiber/error.hpp"

namespace {
using fiber::detail::ended_from_outside;
using fiber::detail::outside_deaths;

TEST(outside_deaths, only_a_kill_or_a_termination_no_limit_and_no_pool_sent_is_from_outside) {
  EXPECT_TRUE(ended_from_outside(-SIGKILL, false, false));
  EXPECT_TRUE(ended_from_outside(-SIGTERM, false, false));
  for (int crash : {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL})
    EXPECT_FALSE(ended_from_outside(-crash, false, false)) << "signal " << crash;
  EXPECT_FALSE(ended_from_outside(0, false, false));
  EXPECT_FALSE(ended_from_outside(3, false, false));
  EXPECT_FALSE(ended_from_outside(-SIGKILL, true, false)) << "a memory stop is the item's";
  EXPECT_FALSE(ended_from_outside(-SIGKILL, false, true)) << "the pool's own kill (it stopped answering) is the item's";
  EXPECT_FALSE(ended_from_outside(std::nullopt, false, false)) << "an end with no status";
}

TEST(outside_deaths, the_budget_counts_deaths_in_a_row_over_its_window_and_a_finished_item_starts_it_again) {
  using namespace std::chrono_literals;
  const auto t0 = outside_deaths::clock::time_point{} + 1h;
  outside_deaths d(3, 10s);
  EXPECT_FALSE(d.on_death(t0));
  EXPECT_FALSE(d.on_death(t0 + 1s));
  d.on_progress();
  EXPECT_EQ(d.in_row(), 0u);
  EXPECT_FALSE(d.on_death(t0 + 2s));  // a new row begins
  EXPECT_FALSE(d.on_death(t0 + 3s));
  EXPECT_FALSE(d.on_death(t0 + 4s)) << "three in a row, but in less than the window: a passing storm";
  EXPECT_FALSE(d.on_death(t0 + 11s));
  EXPECT_TRUE(d.on_death(t0 + 12s));
  try {
    std::rethrow_exception(d.error_after("PoolWorker-1-9", "signal 9"));
  } catch (const fiber::error& e) {
    EXPECT_EQ(e.code(), fiber::errc::worker_lost);
    std::string what = e.what();
    for (auto words : {"5 of this pool's workers in a row were ended from outside", "for at least 10000 ms (outside_deaths_ms",
                       "PoolWorker-1-9, signal 9", "memory_mb"})
      EXPECT_NE(what.find(words), std::string::npos) << what;
  }
}

}  // namespace
