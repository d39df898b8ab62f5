// How often a master's batch jobs are asked about (backend/slurm/batch_watch's next_poll): soon
// after a change, backing off while nothing changes, and much less once every job runs with its
// worker linked (the link tells of an end first).
#include <gtest/gtest.h>

#include "backend/slurm/batch_watch.hpp"

using namespace fiber::detail::slurm;
using namespace std::chrono_literals;

TEST(batch_watch, a_change_asks_again_soon) {
  EXPECT_EQ(next_poll(longest_poll, true, false), first_poll);
  EXPECT_EQ(next_poll(quiet_poll, true, true), first_poll);
}

TEST(batch_watch, while_a_job_waits_or_its_worker_has_not_linked_the_wait_doubles_up_to_five_seconds) {
  auto wait = first_poll;
  std::vector<std::chrono::milliseconds> waits;
  for (int i = 0; i < 10; ++i) waits.push_back(wait = next_poll(wait, false, false));
  EXPECT_EQ(waits.front(), 2 * first_poll);
  EXPECT_EQ(waits.back(), longest_poll);
  EXPECT_EQ(longest_poll, 5s);
}

TEST(batch_watch, once_every_job_runs_linked_the_wait_grows_to_a_minute) {
  auto wait = longest_poll;
  for (int i = 0; i < 10; ++i) wait = next_poll(wait, false, true);
  EXPECT_EQ(wait, quiet_poll);
  EXPECT_EQ(quiet_poll, 60s);
  EXPECT_EQ(next_poll(quiet_poll, false, false), longest_poll) << "a job that is not quiet any more brings it back";
}
