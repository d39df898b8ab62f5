// A call's time request (task_estimate) on workers whose engine ends them at a time limit: its
// items go only to a worker with that much time left, one with less is replaced before it is sent
// one, and a call whose items take longer than a new worker gets fails saying so. Workers whose
// engine plans no end (the local backend) take every call, however long its items.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "backend/command.hpp"
#include "fiber/fiber.hpp"
#include "support.hpp"

namespace {
/// Sleeps `ms`, then says which Slurm job (or, elsewhere, which process) ran it.
std::string who_after(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  const char* job = std::getenv("SLURM_JOB_ID");
  return job && *job ? std::string(job) : std::to_string(::getpid());
}
}  // namespace
FIBER_REMOTE(who_after);

namespace {
using namespace std::chrono_literals;

#define SLURM_ONLY() \
  if (fiber_test::backend_under_test() != "slurm") FIBER_TEST_BACKEND_GATED("a Slurm job's time limit")

// No engine end is planned for a local worker: an hour's estimate takes nothing from it.
TEST(pool_time_request, workers_without_a_planned_end_take_items_of_any_estimate) {
  if (fiber_test::backend_under_test() != "local") FIBER_TEST_BACKEND_GATED("local workers have no time limit");
  fiber::pool p(fiber::pool_options{.processes = 1});
  auto first = p.apply(&who_after, 0).get();
  auto out = p.with({.task_estimate = std::chrono::hours(1)}).map(&who_after, std::vector<int>{0, 0}).get();
  EXPECT_EQ(out, (std::vector<std::string>{first, first}));
  EXPECT_EQ(p.stats().workers_lost, 0u);
}

// Items said to take 2 minutes on workers whose Slurm jobs have 1: none could finish one, and the
// call fails at once rather than waiting for a worker that would.
TEST(pool_time_request, a_call_whose_items_outlast_a_new_worker_fails_saying_so) {
  SLURM_ONLY();
  fiber::context ctx(fiber::config::load({{"slurm_time_limit", "1"}}));
  fiber::pool p(ctx, fiber::pool_options{.processes = 1});
  fiber_test::expect_error([&] { p.with({.task_estimate = 2min}).map(&who_after, std::vector<int>{0}).get(); },
                           fiber::errc::unsatisfiable, {"task_estimate", "slurm_time_limit"});
  // The pool goes on: a call without the estimate runs.
  EXPECT_EQ(p.map(&who_after, std::vector<int>{0}).get().size(), 1u);
}

// A busy controller may answer squeue only after a worker has connected: the call still fails at
// once, for the job's end is known from the limit it was submitted with. A squeue on PATH that
// fails until the test lets it through plays that controller.
TEST(pool_time_request, a_call_whose_items_outlast_a_new_worker_fails_before_squeue_has_answered) {
  SLURM_ONLY();
  auto dir = fiber_test::run_folder() / ("fiber-squeue-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto real = fiber::detail::run_command({"sh", "-c", "command -v squeue"}).out;
  while (!real.empty() && real.back() == '\n') real.pop_back();
  ASSERT_FALSE(real.empty());
  {
    std::ofstream w(dir / "squeue");
    w << "#!/bin/sh\n"
      << "[ -e " << (dir / "answer").string() << " ] && exec " << real << " \"$@\"\n"
      << "echo 'squeue: error: slurm_load_jobs error: Socket timed out on send/recv operation' >&2\n"
      << "exit 1\n";
  }
  std::filesystem::permissions(dir / "squeue", std::filesystem::perms::owner_all);
  std::string path = std::getenv("PATH");
  ::setenv("PATH", (dir.string() + ":" + path).c_str(), 1);
  {
    fiber::context ctx(fiber::config::load({{"slurm_time_limit", "1"}}));
    fiber::pool p(ctx, fiber::pool_options{.processes = 1});
    fiber_test::expect_error([&] { p.with({.task_estimate = 2min}).map(&who_after, std::vector<int>{0}).get(); },
                             fiber::errc::unsatisfiable, {"task_estimate", "slurm_time_limit"});
    std::ofstream(dir / "answer").put('\n');  // the controller answers again: the pool ends as usual
  }
  ::setenv("PATH", path.c_str(), 1);
  std::filesystem::remove_all(dir);
}

// A worker of a 2-minute Slurm job that ran a 25-second item has under 95 s left: a call whose
// items take 100 s is not sent to it, and it is replaced (a new job has the time); nothing lost.
TEST(pool_time_request, a_worker_with_less_time_left_than_an_item_takes_is_replaced_before_it_gets_one) {
  SLURM_ONLY();
  fiber::context ctx(fiber::config::load({{"slurm_time_limit", "2"}}));
  fiber::pool p(ctx, fiber::pool_options{.processes = 1, .max_attempts = 1});
  auto aged = p.apply(&who_after, 25000).get();
  auto next = p.with({.task_estimate = 100s}).apply(&who_after, 0).get();
  EXPECT_NE(next, aged) << "the item went to a worker whose job ends before it would";
  auto st = p.stats();
  EXPECT_EQ(st.workers_lost, 0u);
  EXPECT_EQ(st.drained, 0u);
}

}  // namespace
