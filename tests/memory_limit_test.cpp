// A worker's memory limit, for real: a function that declares `.memory_mb` runs only in workers
// limited to it, an item that touches memory past the limit fails with errc::memory_exceeded
// naming the limit and the peak while the pool goes on, the kernel's OOM killer never fires (the
// limit stops the worker first), and memory a worker only reserves (a large mapping, threads'
// stacks: what RLIMIT_AS counted) is not held against it. Local children are watched by the
// master (memory_watch); containers and pods by their engine's limit.
#include <fiber/fiber.hpp>
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "support.hpp"

namespace {
/// Touches `mb` MiB, a page at a time, and says how much it touched; from 1 GiB on it keeps
/// what it touched until it is stopped (a limit that polls, as Slurm's does every second, must
/// see it).
long hog(long mb) {
  std::vector<char> block(static_cast<std::size_t>(mb) << 20);
  for (std::size_t i = 0; i < block.size(); i += 4096) block[i] = 1;
  long sum = 0;
  for (std::size_t i = 0; i < block.size(); i += 1 << 20) sum += block[i];
  while (mb >= 1024) std::this_thread::sleep_for(std::chrono::seconds(1));
  return sum;
}
/// Should the limit not bind, the item fails with timed_out rather than hanging the test.
constexpr auto unbound = std::chrono::minutes(2);
/// Reserves 1 GiB of address space without touching it, and starts 32 threads (each with a
/// stack of 8 MiB reserved): far past a 128 MiB limit on address space, well under one on
/// resident memory.
int reserve_a_lot() {
  void* p = ::mmap(nullptr, std::size_t{1} << 30, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error(std::string("mmap: ") + std::strerror(errno));
  std::vector<std::thread> threads;
  for (int i = 0; i < 32; ++i) threads.emplace_back([] {});
  for (auto& t : threads) t.join();
  ::munmap(p, std::size_t{1} << 30);
  return 32;
}
int twice(int x) { return 2 * x; }

}  // namespace
FIBER_REMOTE(hog);
FIBER_META(hog, .memory_mb = 256);
FIBER_REMOTE(reserve_a_lot);
FIBER_META(reserve_a_lot, .memory_mb = 128);
FIBER_REMOTE(twice);

// As a new user would: a pool of two with no limit of its own, and a function declared to use at
// most 256 MiB that touches 1 GiB. The limit binds (new workers start with it) and the item fails
// with the words a user needs; the items beside it and the pool after it are untouched. Locally
// under each way a limit binds: a memory cgroup (where this host lets fiber make one) and the watch.
void past_the_limit(const std::string& local_memory_limit) {
  auto kills_before = fiber_test::oom_kills();
  auto runs_here = std::filesystem::temp_directory_path() /
                   ("fiber-memory-limit-" + std::to_string(::getpid()) + "-" + local_memory_limit);
  auto cfg = fiber::config::load({{"local_memory_limit", local_memory_limit}, {"record_dir", runs_here.string()}});
  {
    fiber::context ctx(cfg);
    fiber::pool pool(ctx, {.processes = 2, .task_timeout = unbound});
    auto small = pool.apply_async(&hog, 16L);
    auto big = pool.apply_async(&hog, 1024L);
    auto small_too = pool.apply_async(&hog, 32L);
    EXPECT_EQ(std::move(small).get(), 16);
    EXPECT_EQ(std::move(small_too).get(), 32);
    try {
      (void)std::move(big).get();
      ADD_FAILURE() << "1 GiB under a limit of 256 MiB returned normally";
    } catch (const fiber::error& e) {
      EXPECT_EQ(e.code(), fiber::errc::memory_exceeded) << e.what();
      std::string what = e.what();
      for (auto words : {"hog", "memory limit (256 MiB", "FIBER_META(hog, .memory_mb = N)"})
        EXPECT_NE(what.find(words), std::string::npos) << words << " in: " << what;
      // The peak as the limit saw it: at or above the limit, where the engine says (Docker and
      // Kubernetes report only that the kernel stopped it).
      if (auto at = what.find("peak "); at != std::string::npos)
        EXPECT_GE(std::stol(what.substr(at + 5)), 256) << what;
      else
        EXPECT_FALSE(fiber_test::backend_under_test() == "local") << "the watch always knows the peak: " << what;
    }
    EXPECT_EQ(pool.map(&twice, std::vector<int>{1, 2, 3}).get(), (std::vector<int>{2, 4, 6})) << "the pool goes on";
    EXPECT_EQ(pool.stats().memory_exceeded, 1u);
  }
  if (fiber_test::backend_under_test() == "local")
    EXPECT_EQ(fiber_test::oom_kills(), kills_before) << "the kernel's OOM killer fired: the limit came too late";
  // The run's recording counts it too (fiber history).
  auto runs = fiber::run_history(cfg);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].workers_memory_exceeded, 1u);
  std::filesystem::remove_all(runs_here);
}

TEST(memory_limit, an_item_past_its_functions_limit_fails_with_memory_exceeded_and_the_pool_goes_on) {
  past_the_limit("auto");
}

TEST(memory_limit, watched_an_item_past_its_functions_limit_fails_with_memory_exceeded_and_the_pool_goes_on) {
  past_the_limit("watch");
}

TEST(memory_limit, a_worker_that_only_reserves_memory_is_not_stopped) {
  fiber::pool pool(1);
  EXPECT_EQ(pool.apply(&reserve_a_lot).get(), 32);
  EXPECT_EQ(pool.stats().memory_exceeded, 0u);
}

TEST(memory_limit, with_retry_memory_exceeded_the_item_runs_again_until_max_attempts) {
  fiber::context ctx(fiber::config::load({{"retry_memory_exceeded", "true"}}));
  fiber::pool pool(ctx, {.processes = 1, .max_attempts = 2, .task_timeout = unbound});
  fiber_test::expect_error([&] { (void)pool.apply(&hog, 1024L).get(); }, fiber::errc::memory_exceeded,
                           {"2 worker(s) lost running it; max_attempts reached"});
  EXPECT_EQ(pool.stats().memory_exceeded, 2u);
}

// A pool that would grow past the run's memory budget is refused, with the sums, and goes on as
// it was.
TEST(memory_limit, a_resize_past_the_memory_budget_is_refused_and_the_pool_goes_on) {
  fiber::context ctx(fiber::config::load({{"memory_budget_mb", "600"}}));
  fiber::pool pool(ctx, {.processes = 1, .needs = {.memory_mb = 256}});
  fiber_test::expect_error([&] { pool.resize(3); }, fiber::errc::unsatisfiable,
                           {"3 workers with a memory limit of 256 MiB each add up to 768 MiB", "memory_budget_mb"});
  pool.resize(2);  // within it
  EXPECT_EQ(pool.map(&twice, std::vector<int>{1, 2}).get(), (std::vector<int>{2, 4}));
  EXPECT_EQ(pool.stats().workers, 2u);
}

