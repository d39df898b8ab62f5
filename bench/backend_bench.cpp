// The same start-up figures on whichever backend FIBER_* selects (bench/compare/run.sh docker runs
// it under local and under docker): one child's start+join, and a Pool(4) until all workers are
// ready. Few iterations: under docker each child is a container.
#include <benchmark/benchmark.h>
#include <fiber/fiber.hpp>

#include <chrono>
#include <thread>

#include <unistd.h>

#include <filesystem>
#include <set>
#include <span>
#include <string>
#include <vector>

namespace {
void noop() {}
float probe(const fiber::shared<std::span<const float>>& model, std::uint64_t i) { return (*model)[i * 4096]; }
// A host as shared memory sees it: its name and process namespace.
std::string memory_domain(int) {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return std::string(name) + "/" + std::filesystem::read_symlink("/proc/self/ns/pid").string();
}
}  // namespace
FIBER_REMOTE(noop);
FIBER_REMOTE(probe);
FIBER_REMOTE(memory_domain);

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

// A fresh 256 MB model each map (fiber::shared<std::span<const float>>), read by 64 tasks of
// chunksize 1 on a pool of W workers: W = 1 is one copy to one host; on the test Slurm cluster W = 8
// fills both nodes (4 CPUs each), and W = 64 on one started with FIBER_SLURM_NODE_CPUS=32 (Slurm
// fills a node before the next, so only a full cluster spreads the workers). Counters: the copies that left the master per map (bytes sent
// ÷ the object's bytes) and the hosts its workers ran on. Not in the default runs: select it with
// --benchmark_filter=shared_256MB (bench/compare/run.sh slurm does).
static void shared_256MB(benchmark::State& state) {
  fiber::pool p(static_cast<int>(state.range(0)));
  p.ready().get();
  std::vector<float> model(std::size_t(64) << 20, 1.0f);
  std::size_t object_bytes = 0;
  for (auto _ : state) {
    model[0] += 1;  // a new model each map
    auto w = fiber::share(std::span<const float>(model));
    object_bytes = w.bytes();
    std::vector<std::tuple<fiber::shared<std::span<const float>>, std::uint64_t>> tasks;
    for (std::uint64_t i = 0; i < 64; ++i) tasks.emplace_back(w, i);
    benchmark::DoNotOptimize(p.starmap(&probe, tasks, 1).get());
  }
  auto s = p.stats();
  std::vector<int> each(static_cast<std::size_t>(state.range(0)) * 8);
  auto domains = p.map(&memory_domain, each, 1).get();
  state.counters["copies_per_map"] = double(s.shared_bytes_sent) / double(object_bytes) / double(state.iterations());
  state.counters["hosts"] = double(std::set<std::string>(domains.begin(), domains.end()).size());
}
BENCHMARK(shared_256MB)->Arg(1)->Arg(8)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
