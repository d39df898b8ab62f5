// A large map with default chunks while every new worker is SIGKILLed as it appears (a crash-looping
// node, an administrator's kill -9, an engine reclaiming capacity) for a while, then left alone:
// whether the map completes, its time beside the same map with no kills in the same run, and the
// workers lost. Deaths from outside charge no item an attempt; before, the item at the head of each
// chunk run again was charged for them and the map failed with max_attempts.
//   outside_kills_bench [ITEMS=2000000] [KILL_MS=3000] [WORKERS=4]
#include <fiber/fiber.hpp>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <set>
#include <thread>
#include <vector>

#include "proc_children.hpp"

namespace {
int sq(int x) { return x * x; }
}  // namespace
FIBER_REMOTE(sq);

namespace {
using clock_type = std::chrono::steady_clock;

/// The map's seconds and how it ended ("" when it completed exactly).
std::pair<double, std::string> timed_map(fiber::pool& p, const std::vector<int>& xs) {
  auto t0 = clock_type::now();
  std::string failed;
  try {
    auto out = p.map(&sq, xs).get();
    for (std::size_t i = 0; i < xs.size() && failed.empty(); ++i)
      if (out[i] != xs[i] * xs[i]) failed = "result " + std::to_string(i) + " is wrong";
  } catch (const std::exception& e) {
    failed = e.what();
  }
  return {std::chrono::duration<double>(clock_type::now() - t0).count(), failed};
}
}  // namespace

int main(int argc, char** argv) {
  fiber::init(argc, argv);
  int items = argc > 1 ? std::atoi(argv[1]) : 2000000, kill_ms = argc > 2 ? std::atoi(argv[2]) : 3000;
  int workers = argc > 3 ? std::atoi(argv[3]) : 4;
  std::vector<int> xs(static_cast<std::size_t>(items));
  std::iota(xs.begin(), xs.end(), 0);
  fiber::pool calm(workers);
  calm.ready().get();
  auto [calm_s, calm_failed] = timed_map(calm, xs);
  calm.terminate().get();

  std::atomic<bool> killing{true};
  std::atomic<int> killed{0};
  std::thread killer([&] {
    std::set<int> seen;
    auto until = clock_type::now() + std::chrono::milliseconds(kill_ms);
    while (clock_type::now() < until) {
      std::vector<int> pids;
      try {
        pids = fiber_test::child_pids();
      } catch (const std::exception&) {  // a process gone while its /proc entry was read
        continue;
      }
      for (int pid : pids)
        if (seen.insert(pid).second && ::kill(pid, SIGKILL) == 0) ++killed;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    killing = false;
  });
  fiber::pool shot(workers);
  auto [shot_s, shot_failed] = timed_map(shot, xs);
  killer.join();
  auto stats = shot.stats();
  std::printf("%d items, %d workers; every new worker SIGKILLed for %d ms\n", items, workers, kill_ms);
  std::printf("no kills:   %.3f s %s\n", calm_s, calm_failed.empty() ? "completed" : calm_failed.c_str());
  std::printf("with kills: %.3f s %s (%.2fx); %d killed, %zu workers lost, %zu items run again\n", shot_s,
              shot_failed.empty() ? "completed" : ("FAILED: " + shot_failed).c_str(), shot_s / calm_s, killed.load(),
              static_cast<std::size_t>(stats.workers_lost), static_cast<std::size_t>(stats.retried));
  return shot_failed.empty() ? 0 : 1;
}
