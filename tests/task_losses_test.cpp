// What the pool makes of a lost worker's tasks, on its own: the running task's first item charged
// and run alone, the rest cut in quarter chunks that report item by item, the tasks behind it
// untouched; out of attempts or without retries, errors that name the worker and how it ended; a
// deadline's item failing with timed_out unless its call retries it.
#include "primitives/pool/task_losses.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "pool_test_sinks.hpp"

namespace {
using namespace fiber::detail;
using fiber_test::counting_sink;
using fiber_test::submission_of;

struct pool_task_losses : ::testing::Test {
  item_delivery delivery{[](pool_submission&) {}};
  std::uint64_t next_id = 100;
  task_losses losses{delivery, next_id};
  std::shared_ptr<counting_sink> sink = std::make_shared<counting_sink>(20);

  /// A task of items [first, first + count) of a call with `chunksize`.
  pool_task task(std::shared_ptr<pool_submission> sub, std::uint64_t id, std::size_t first, std::size_t count) {
    pool_task t;
    t.id = id;
    t.sub = std::move(sub);
    t.first = first;
    t.packed = t.end = count;
    t.sub->outstanding += count;
    return t;
  }
};

TEST_F(pool_task_losses, the_running_tasks_first_item_runs_alone_and_the_rest_in_quarter_chunks_behind_it_untouched) {
  auto sub = submission_of(sink, 8);
  std::vector<pool_task> held{task(sub, 1, 0, 8), task(sub, 2, 8, 8)};
  held[0].begin = 3;  // three reported before the death
  auto out = losses.after_death(std::move(held), {"PoolWorker-2", "signal 9"}, true, 3);
  ASSERT_EQ(out.size(), 4u);  // item 3 alone; 4-5, 6-7 (quarters of 8); then task 2 as it was
  EXPECT_TRUE(out[0].alone);
  EXPECT_EQ(out[0].id, 1u);
  EXPECT_EQ(out[0].position(), 3u);
  EXPECT_EQ(out[0].count(), 1u);
  EXPECT_EQ(out[0].attempts, 1);
  EXPECT_EQ(out[1].position(), 4u);
  EXPECT_EQ(out[1].count(), 2u);
  EXPECT_TRUE(out[1].careful);
  EXPECT_EQ(out[1].attempts, 0);
  EXPECT_EQ(out[1].id, 100u);  // new numbers, from the queue's count
  EXPECT_EQ(out[2].position(), 6u);
  EXPECT_EQ(out[2].count(), 2u);
  EXPECT_EQ(out[3].id, 2u);
  EXPECT_FALSE(out[3].careful);
  EXPECT_EQ(next_id, 102u);
  EXPECT_EQ(losses.retried(), 13u);  // 5 of task 1, 8 of task 2
  EXPECT_TRUE(sink->errors.empty());
}

// A worker killed from outside: nothing its item did, so the running task goes back as it was,
// uncharged, even at its last attempt; without retries its items fail as for any death.
TEST_F(pool_task_losses, a_death_from_outside_charges_nothing_and_the_running_task_goes_back_whole) {
  auto sub = submission_of(sink, 8);
  std::vector<pool_task> held{task(sub, 1, 0, 8), task(sub, 2, 8, 8)};
  held[0].begin = 3;
  held[0].attempts = 2;
  worker_end end{"PoolWorker-2", "signal 9"};
  end.outside = true;
  auto out = losses.after_death(std::move(held), end, true, 3);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].id, 1u);
  EXPECT_EQ(out[0].position(), 3u);
  EXPECT_EQ(out[0].count(), 5u);
  EXPECT_EQ(out[0].attempts, 2) << "charged for a death from outside";
  EXPECT_FALSE(out[0].alone);
  EXPECT_EQ(out[1].id, 2u);
  EXPECT_EQ(next_id, 100u);
  EXPECT_EQ(losses.retried(), 13u);
  EXPECT_TRUE(sink->errors.empty());

  auto once = submission_of(sink, 4, /*retry=*/false);
  std::vector<pool_task> unretried{task(once, 3, 0, 4)};
  (void)losses.after_death(std::move(unretried), end, true, 3);
  EXPECT_EQ(sink->errors.size(), 4u) << "without retries, a death from outside fails what may have run";
}

TEST_F(pool_task_losses, out_of_attempts_the_charged_item_fails_naming_the_worker_and_the_rest_runs_carefully) {
  auto sub = submission_of(sink, 4);
  std::vector<pool_task> held{task(sub, 1, 0, 4)};
  held[0].attempts = 2;
  auto out = losses.after_death(std::move(held), {"PoolWorker-2", "exit code 3"}, true, 3);
  ASSERT_EQ(sink->errors.size(), 1u);
  EXPECT_EQ(sink->errors.at(0), fiber::errc::worker_lost);
  EXPECT_NE(sink->reasons.at(0).find("was running on PoolWorker-2 when it ended (exit code 3)"), std::string::npos)
      << sink->reasons.at(0);
  EXPECT_NE(sink->reasons.at(0).find("3 worker(s) lost running it; max_attempts reached"), std::string::npos);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].position(), 1u);
  EXPECT_TRUE(out[0].careful);
}

TEST_F(pool_task_losses, without_retries_every_item_of_the_running_chunk_not_yet_reported_fails) {
  auto sub = submission_of(sink, 4, /*retry=*/false);
  std::vector<pool_task> held{task(sub, 1, 0, 4)};
  held[0].begin = 1;
  auto out = losses.after_death(std::move(held), {"PoolWorker-1", "signal 9"}, true, 3);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(sink->errors.size(), 3u);
  EXPECT_NE(sink->reasons.at(1).find("retries are off"), std::string::npos);
  EXPECT_NE(sink->reasons.at(2).find("was in the same chunk, not yet reported"), std::string::npos) << sink->reasons.at(2);
  EXPECT_EQ(losses.retried(), 0u);
}

TEST_F(pool_task_losses, an_item_past_its_deadline_fails_with_timed_out_unless_its_call_retries_it) {
  auto sub = submission_of(sink, 2);
  sub->timeout = std::chrono::milliseconds(50);
  std::vector<pool_task> held{task(sub, 1, 0, 2)};
  auto out = losses.after_timeout(std::move(held), "PoolWorker-4", 3);
  ASSERT_EQ(sink->errors.size(), 1u);
  EXPECT_EQ(sink->errors.at(0), fiber::errc::timed_out);
  EXPECT_NE(sink->reasons.at(0).find("ran longer than its task_timeout (50 ms) on PoolWorker-4"), std::string::npos);
  ASSERT_EQ(out.size(), 1u);  // the item after it, again
  EXPECT_EQ(out[0].position(), 1u);

  auto retried = submission_of(sink, 2);
  retried->retry_timed_out = true;
  std::vector<pool_task> again{task(retried, 2, 10, 2)};
  out = losses.after_timeout(std::move(again), "PoolWorker-4", 3);
  EXPECT_EQ(sink->errors.size(), 1u);  // nothing failed this time
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[0].alone);
  EXPECT_EQ(out[0].attempts, 1);
}

// ---- a worker stopped for going past its memory limit

worker_end stopped_for_memory() { return {"PoolWorker-3", "stopped", fiber::detail::memory_stop{256, 301}}; }

TEST_F(pool_task_losses, an_item_sure_to_have_gone_past_the_memory_limit_fails_with_the_limit_the_peak_and_the_fix) {
  auto sub = submission_of(sink, 1);
  std::vector<pool_task> held{task(sub, 1, 5, 1), task(sub, 2, 6, 1)};
  auto out = losses.after_death(std::move(held), stopped_for_memory(), true, 3);
  ASSERT_EQ(sink->errors.size(), 1u);
  EXPECT_EQ(sink->errors.at(5), fiber::errc::memory_exceeded);
  auto& why = sink->reasons.at(5);
  for (auto words : {"item 5", "went past its worker's memory limit", "PoolWorker-3", "256 MiB", "peak 301 MiB",
                     ".memory_mb = N", "retry_memory_exceeded"})
    EXPECT_NE(why.find(words), std::string::npos) << words << " in: " << why;
  ASSERT_EQ(out.size(), 1u) << "the task behind it goes on, uncharged";
  EXPECT_EQ(out[0].position(), 6u);
  EXPECT_EQ(out[0].attempts, 0);
}

TEST_F(pool_task_losses, a_memory_stop_in_a_chunk_runs_its_first_item_again_alone_to_find_the_culprit) {
  auto sub = submission_of(sink, 4);
  std::vector<pool_task> held{task(sub, 1, 0, 4)};
  auto out = losses.after_death(std::move(held), stopped_for_memory(), true, 3);
  EXPECT_TRUE(sink->errors.empty()) << "which item went past the limit is not known yet";
  ASSERT_FALSE(out.empty());
  EXPECT_TRUE(out[0].alone);
  EXPECT_EQ(out[0].attempts, 1);

  // Alone, it goes past the limit again: it was the one, and it fails now (no third try).
  std::vector<pool_task> alone{std::move(out[0])};
  out = losses.after_death(std::move(alone), stopped_for_memory(), true, 3);
  ASSERT_EQ(sink->errors.size(), 1u);
  EXPECT_EQ(sink->errors.at(0), fiber::errc::memory_exceeded);
  EXPECT_TRUE(out.empty());
}

TEST_F(pool_task_losses, without_retries_a_memory_stop_fails_every_item_not_reported_with_memory_exceeded) {
  auto sub = submission_of(sink, 3, /*retry=*/false);
  std::vector<pool_task> held{task(sub, 1, 0, 3)};
  auto out = losses.after_death(std::move(held), stopped_for_memory(), true, 3);
  EXPECT_TRUE(out.empty());
  ASSERT_EQ(sink->errors.size(), 3u);
  for (auto& [index, code] : sink->errors) EXPECT_EQ(code, fiber::errc::memory_exceeded) << index;
  EXPECT_NE(sink->reasons.at(1).find("was in the chunk its worker ran, not yet reported"), std::string::npos)
      << sink->reasons.at(1);
}

TEST_F(pool_task_losses, with_retry_memory_exceeded_the_item_runs_again_and_fails_with_memory_exceeded_out_of_attempts) {
  auto sub = submission_of(sink, 1);
  std::vector<pool_task> held{task(sub, 1, 0, 1)};
  auto out = losses.after_death(std::move(held), stopped_for_memory(), true, 2, /*retry_memory=*/true);
  EXPECT_TRUE(sink->errors.empty());
  ASSERT_EQ(out.size(), 1u);
  out = losses.after_death(std::move(out), stopped_for_memory(), true, 2, /*retry_memory=*/true);
  ASSERT_EQ(sink->errors.size(), 1u);
  EXPECT_EQ(sink->errors.at(0), fiber::errc::memory_exceeded);
  EXPECT_NE(sink->reasons.at(0).find("max_attempts reached"), std::string::npos) << sink->reasons.at(0);
}

}  // namespace
