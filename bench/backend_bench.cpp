// The same start-up figures on whichever backend FIBER_* selects (bench/compare/run.sh docker runs
// it under local and under docker): one child's start+join, and a Pool(4) until all workers are
// ready. Few iterations: under docker each child is a container.
#include <benchmark/benchmark.h>
#include <fiber/fiber.hpp>

#include <chrono>
#include <thread>

namespace {
void noop() {}
}
FIBER_REMOTE(noop);

static void child_start_join(benchmark::State& state) {
  for (auto _ : state) {
    fiber::process p(&noop);
    p.start().get();
    p.join().get();
    if (p.exitcode() != 0) state.SkipWithError("child failed");
  }
}
BENCHMARK(child_start_join)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(20)->Repetitions(3);

static void pool4_ready(benchmark::State& state) {
  for (auto _ : state) {
    fiber::pool p(4);
    p.ready().get();
    state.PauseTiming();
    p.terminate().get();
    state.ResumeTiming();
  }
}
BENCHMARK(pool4_ready)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(5)->Repetitions(3);

// A pool of N workers started, then left idle for S seconds: what an engine's API sees of a
// pool beyond its start (bench/compare/run.sh kubernetes counts the requests in each phase from
// the test cluster's audit log by these wall-clock marks). Not in the default runs: select it with
// --benchmark_filter=pool_idle.
static double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
static void pool_idle(benchmark::State& state) {
  auto workers = static_cast<int>(state.range(0));
  auto idle = std::chrono::seconds(state.range(1));
  for (auto _ : state) {
    state.counters["t_start"] = wall_seconds();
    fiber::pool p(workers);
    p.ready().get();
    state.counters["t_ready"] = wall_seconds();
    std::this_thread::sleep_for(idle);  // the phase being measured: nothing to do
    state.counters["t_idle_end"] = wall_seconds();
    p.terminate().get();
    state.counters["t_end"] = wall_seconds();
  }
}
BENCHMARK(pool_idle)->Args({4, 60})->Args({100, 60})->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);
