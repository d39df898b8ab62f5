// What a level costs (docs/design.md, "Nested processes"): start + join of a child from the master
// beside a grandchild's from a child, and a pool's per-task time in the master beside the same
// pool run by a child (its workers are grandchildren; its queue traffic goes up one level).
// Measured in one run, repetitions interleaved; docs/performance.md has the command.
#include <benchmark/benchmark.h>
#include <fiber/fiber.hpp>

#include <chrono>
#include <numeric>
#include <vector>

namespace {
using clock_type = std::chrono::steady_clock;

void noop() {}
int square(int x) { return x * x; }

/// `count` start + join of a child, each one's seconds.
std::vector<double> start_joins(int count) {
  std::vector<double> seconds;
  for (int i = 0; i < count; ++i) {
    auto t0 = clock_type::now();
    fiber::process p(&noop);
    p.start().get();
    p.join().get();
    seconds.push_back(std::chrono::duration<double>(clock_type::now() - t0).count());
  }
  return seconds;
}
/// In a child: the same, reported up.
void start_joins_in_child(int count, fiber::simple_queue<std::vector<double>> out) { out.put(start_joins(count)).get(); }

/// Seconds per task of `maps` maps of `tasks` items, chunksize 1, on a pool of 2 made here.
std::vector<double> pool_maps(int maps, int tasks) {
  fiber::pool p(2);
  std::vector<int> xs(tasks);
  std::iota(xs.begin(), xs.end(), 0);
  (void)p.map(&square, xs, 1).get();  // the workers are up
  std::vector<double> per_task;
  for (int m = 0; m < maps; ++m) {
    auto t0 = clock_type::now();
    (void)p.map(&square, xs, 1).get();
    per_task.push_back(std::chrono::duration<double>(clock_type::now() - t0).count() / tasks);
  }
  return per_task;
}
void pool_maps_in_child(int maps, int tasks, fiber::simple_queue<std::vector<double>> out) {
  out.put(pool_maps(maps, tasks)).get();
}

/// Runs `f` in a child and hands its figures to the benchmark, one per iteration.
template <class F, class... Args>
void figures_from_child(benchmark::State& state, F f, Args... args) {
  fiber::simple_queue<std::vector<double>> out;
  fiber::process p(f, args..., out);
  p.start().get();
  auto figures = out.get().get();
  p.join().get();
  std::size_t i = 0;
  for (auto _ : state) state.SetIterationTime(figures.at(i++));
}

}  // namespace
FIBER_REMOTE(noop);
FIBER_REMOTE(square);
FIBER_REMOTE(start_joins_in_child);
FIBER_REMOTE(pool_maps_in_child);

constexpr int start_count = 100;
constexpr int maps = 10, tasks = 5000;

static void child_start_join(benchmark::State& state) {
  auto figures = start_joins(start_count);
  std::size_t i = 0;
  for (auto _ : state) state.SetIterationTime(figures.at(i++));
}
static void grandchild_start_join(benchmark::State& state) { figures_from_child(state, &start_joins_in_child, start_count); }
static void pool_task_in_master(benchmark::State& state) {
  auto figures = pool_maps(maps, tasks);
  std::size_t i = 0;
  for (auto _ : state) state.SetIterationTime(figures.at(i++));
}
static void pool_task_in_child(benchmark::State& state) { figures_from_child(state, &pool_maps_in_child, maps, tasks); }

BENCHMARK(child_start_join)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(start_count)->Repetitions(3);
BENCHMARK(grandchild_start_join)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(start_count)->Repetitions(3);
BENCHMARK(pool_task_in_master)->Unit(benchmark::kMicrosecond)->UseManualTime()->Iterations(maps)->Repetitions(3);
BENCHMARK(pool_task_in_child)->Unit(benchmark::kMicrosecond)->UseManualTime()->Iterations(maps)->Repetitions(3);
