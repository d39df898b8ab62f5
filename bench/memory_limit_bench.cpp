// What a worker's memory limit costs, and how soon it acts (local backend: the master's
// memory_watch). Interleaved in one run (--benchmark_enable_random_interleaving=true;
// docs/performance.md has the command):
//   limited_map/L       a map of 4,000,000 trivial tasks in the pool's own chunks on pool(4) (long
//                       enough to span several polls), its workers without a limit (L = 0) or
//                       each limited to 1 GiB: in a memory cgroup of its own where the host lets
//                       fiber make one (L = 1), watched every memory_poll_ms (L = 2): the ratios
//                       to L = 0 are what each way of limiting costs.
//   limit_to_error/W    a worker limited to 128 MiB touches memory until its VmRSS is past the
//                       limit (W = 1, local_memory_limit=watch) or 4 MiB short of it (W = 0: a
//                       memory cgroup, which holds it at the limit), notes when it saw that
//                       (CLOCK_MONOTONIC, the same clock in every process of the host) and
//                       touches on; the time from that note to the item's memory_exceeded in the
//                       master is the counter crossing_to_error_ms (`timed` of the iterations had
//                       their note sent before the stop).
#include <benchmark/benchmark.h>
#include <fiber/fiber.hpp>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdint>
#include <numeric>
#include <thread>
#include <vector>

namespace {
long plus_one(long x) { return x + 1; }

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// This process's resident memory, in bytes (VmRSS).
std::uint64_t resident() {
  std::FILE* f = std::fopen("/proc/self/status", "re");
  if (!f) return 0;
  char line[256];
  unsigned long long kb = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "VmRSS: %llu kB", &kb) == 1) break;
  std::fclose(f);
  return kb * 1024;
}

/// Touches memory a MiB at a time until its resident memory is past `mark_mb`, sends the time it
/// saw that, and touches on (past the limit, or into the cgroup that holds it there) until it is
/// stopped. (A watch quicker than the send leaves the time unsent.)
long cross_and_wait(long mark_mb, fiber::simple_queue<std::int64_t> crossed) {
  std::vector<std::vector<char>> held;
  while (resident() <= static_cast<std::uint64_t>(mark_mb) << 20) held.emplace_back(std::size_t{1} << 20, 1);
  crossed.put(now_ns()).get();
  for (;;) held.emplace_back(std::size_t{1} << 20, 1);
}
}  // namespace
FIBER_REMOTE(plus_one);
FIBER_REMOTE(cross_and_wait);

static void limited_map(benchmark::State& state) {
  bool limited = state.range(0) != 0;
  std::vector<long> xs(4000000);
  std::iota(xs.begin(), xs.end(), 0L);
  fiber::context ctx(fiber::config::load({{"record", "false"}, {"local_memory_limit", state.range(0) == 2 ? "watch" : "auto"}}));
  fiber::pool p(ctx, {.processes = 4, .needs = {.memory_mb = limited ? 1024 : 0}});
  p.ready().get();
  (void)p.map(&plus_one, xs).get();  // warm-up
  for (auto _ : state) {
    auto r = p.map(&plus_one, xs).get();
    if (r.back() != static_cast<long>(xs.size())) state.SkipWithError("wrong result");
  }
  state.counters["tasks_per_s"] = benchmark::Counter(static_cast<double>(xs.size()), benchmark::Counter::kIsIterationInvariantRate);
  p.terminate().get();
}
BENCHMARK(limited_map)
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->ArgName("L")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(5)
    ->Repetitions(8);

static void limit_to_error(benchmark::State& state) {
  bool watched = state.range(0) != 0;
  fiber::context ctx(fiber::config::load({{"record", "false"}, {"local_memory_limit", watched ? "watch" : "auto"}}));
  fiber::simple_queue<std::int64_t> crossed(ctx);
  fiber::pool p(ctx, {.processes = 1, .needs = {.memory_mb = 128}});
  p.ready().get();
  double total_ms = 0;
  int timed = 0;
  for (auto _ : state) {
    // The watch lets it past the limit; a cgroup holds it there, so it notes 4 MiB before.
    auto item = p.apply_async(&cross_and_wait, watched ? 128L : 124L, crossed);
    try {
      (void)std::move(item).get();
      state.SkipWithError("the item was not stopped");
      break;
    } catch (const fiber::error& e) {
      if (e.code() != fiber::errc::memory_exceeded) {
        state.SkipWithError(e.what());
        break;
      }
    }
    auto failed_at = now_ns();
    if (auto at = crossed.get(std::chrono::milliseconds(0)).get()) {
      total_ms += static_cast<double>(failed_at - *at) / 1e6;
      ++timed;
    }
  }
  state.counters["crossing_to_error_ms"] = timed ? total_ms / static_cast<double>(timed) : -1.0;
  state.counters["timed"] = static_cast<double>(timed);
  p.terminate().get();
}
BENCHMARK(limit_to_error)
    ->Arg(0)
    ->Arg(1)
    ->ArgName("W")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(10)
    ->Repetitions(3);
