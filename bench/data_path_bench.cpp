// The data path (issue 16): the workloads the anchors in bench/compare/data_path.py run with
// multiprocessing, computed the same way.
//   es_round: an evolution-strategies generation, pool(4).map of 256 tasks, each a
//             10,000-double parameter vector and a seed, each returning a double; the time of a
//             generation includes building its tasks, as the Python side's does.
//   payload_8MB: pool(4).map of 64 tasks of a 1,000,000-double vector: MB/s of arguments.
#include <benchmark/benchmark.h>
#include <fiber/fiber.hpp>

#include <cstdint>
#include <numeric>
#include <tuple>
#include <vector>

namespace {
double es_evaluate(std::vector<double> theta, std::uint64_t seed) {
  return theta[seed % theta.size()] + static_cast<double>(seed);  // the work is not what is measured
}
double payload_sum(std::vector<double> v) { return v.front() + v.back() + static_cast<double>(v.size()); }
}  // namespace
FIBER_REMOTE(es_evaluate);
FIBER_REMOTE(payload_sum);

namespace {

void es_round(benchmark::State& state) {
  const int workers = 4, tasks = 256, dim = 10000;
  fiber::pool p(workers);
  p.ready().get();
  std::vector<double> theta(dim);
  std::iota(theta.begin(), theta.end(), 0.0);
  std::uint64_t generation = 0;
  for (auto _ : state) {
    std::vector<std::tuple<std::vector<double>, std::uint64_t>> batch;
    batch.reserve(tasks);
    for (int i = 0; i < tasks; ++i) batch.emplace_back(theta, generation * tasks + i);
    auto fitness = p.starmap(&es_evaluate, batch).get();
    benchmark::DoNotOptimize(fitness);
    theta[generation % dim] += 1e-3 * fitness[0];  // the next generation depends on this one
    ++generation;
  }
}
// real_time is the time of one generation.
BENCHMARK(es_round)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(20)->Repetitions(3);

void payload_8MB(benchmark::State& state) {
  const int workers = 4, tasks = 64;
  const std::size_t n = 1'000'000;
  fiber::pool p(workers);
  p.ready().get();
  std::vector<std::vector<double>> payloads(tasks, std::vector<double>(n, 1.5));
  for (auto _ : state) {
    auto r = p.map(&payload_sum, payloads).get();
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * tasks * n * sizeof(double));
}
BENCHMARK(payload_8MB)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3)->Repetitions(3);

}  // namespace
