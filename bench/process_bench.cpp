// Start + join of one child process (bench/compare/run.sh prints it beside multiprocessing's, process_start.py).
#include <benchmark/benchmark.h>
#include <fiber/fiber.hpp>

namespace {
void noop() {}
}
FIBER_REMOTE(noop);

static void process_start_join(benchmark::State& state) {
  for (auto _ : state) {
    fiber::process p(&noop);
    p.start().get();
    p.join().get();
    if (p.exitcode() != 0) state.SkipWithError("child failed");
  }
}
BENCHMARK(process_start_join)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(200)->Repetitions(5);

// Start of the handshake only: from start() until the child is ready to run its target.
static void process_start_only(benchmark::State& state) {
  std::vector<fiber::process> started;
  for (auto _ : state) {
    fiber::process p(&noop);
    p.start().get();
    state.PauseTiming();
    p.join().get();
    state.ResumeTiming();
  }
}
BENCHMARK(process_start_only)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(200)->Repetitions(5);
