// What a pool's run leaves in `fiber history` (fiber/history.hpp), counted as a user reads it:
// a worker killed for task_timeout had one item that ran too long; the chunks prefetched behind
// it never started, and are lost with the worker, not timed out.
#include <fiber/history.hpp>

#include "pool_support.hpp"
#include "record_folder.hpp"

namespace {
int hang_or_triple(int x) {
  if (x < 0) std::this_thread::sleep_for(std::chrono::hours(1));  // the task's work: it outlives its timeout
  return 3 * x;
}
}  // namespace
FIBER_REMOTE(hang_or_triple);

// One worker holding three chunks of one item (its credit): the first hangs and is timed out.
TEST(pool_history, a_worker_killed_for_task_timeout_counts_one_timed_out_task_not_its_prefetched_ones) {
  record_folder dir("timeout");
  {
    fiber::context ctx(dir.cfg());
    fiber::pool p(ctx, fiber::pool_options{.processes = 1, .prefetch = 3});
    p.ready().get();
    fiber_test::expect_error(
        [&] { (void)p.with({.task_timeout = std::chrono::milliseconds(500)}).map(&hang_or_triple, std::vector<int>{-1, 1, 2}, 1).get(); },
        fiber::errc::timed_out, "task_timeout");
  }
  auto runs = fiber::run_history(dir.cfg());
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].tasks_timed_out, 1u) << "the prefetched chunks were counted as timed out too";
  EXPECT_EQ(runs[0].tasks_sent, 3u);
  EXPECT_EQ(runs[0].tasks_lost, 2u) << "the two behind it went with the worker";
}
