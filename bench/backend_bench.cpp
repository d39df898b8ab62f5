// The same start-up figures on whichever backend FIBER_* selects (bench/compare/run.sh docker runs
// it under local and under docker): one child's start+join, and a Pool(4) until all workers are
// ready. Few iterations: under docker each child is a container.
#include <benchmark/benchmark.h>
#include <fiber/fiber.hpp>

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
