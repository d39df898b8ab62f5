// What a pool's run leaves in `fiber history` (fiber/history.hpp), counted as a user reads it:
// a worker killed for task_timeout had one item that ran too long; the chunks prefetched behind
// it never started, and are lost with the worker, not timed out.
#include <fiber/history.hpp>

#include "core/flight_recorder.hpp"

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

// ~pool ends its workers: the recording says the pool ended them, not a bare "signal 9", and
// has what each held, read by the master before the end (a worker killed never records its own
// last memory).
TEST(pool_history, workers_ended_by_their_pool_are_recorded_as_such_with_their_memory) {
  record_folder dir("ended");
  std::string worker;
  {
    fiber::context ctx(dir.cfg({{"record_memory_ms", "0"}}));  // no samples of their own
    fiber::pool p(ctx, 1);
    worker = p.apply(&my_name, 0).get();
  }
  auto runs = fiber::run_history(dir.cfg());
  ASSERT_EQ(runs.size(), 1u);
  std::map<std::uint32_t, std::string> names;
  std::string end;
  std::uint64_t peak = 0;
  for (auto& [r, text] : fiber::detail::read_flight_file(runs[0].path)) {
    if (r.kind == fiber::detail::record_kind::name) names[r.a] = text;
    if (r.kind == fiber::detail::record_kind::process_end && names[r.a] == worker) end = text + " d=" + std::to_string(r.d);
    if (r.kind == fiber::detail::record_kind::memory && names[r.a] == worker) peak = std::max(peak, r.d);
  }
  EXPECT_EQ(end, "ended by its pool (terminate) d=2") << worker;
  EXPECT_GT(peak, 0u) << "no memory of " << worker;
}
