// What a durable run's journal costs a pool: the same maps with the journal off (J = 0) and on
// (J = 1), each in a context of its own, interleaved in one run
// (--benchmark_enable_random_interleaving=true; docs/performance.md has the command).
//   journaled_map/J/C   a map of trivial tasks on pool(4): C = 1, 20,000 items at chunksize 1 (a
//                       task's overhead); C = 0, 100,000 items in the pool's own chunks (its
//                       throughput). With J = 1, journal_bytes_per_item is what the journal grew by
//                       for each item (a 16-byte result: two longs).
//   journal_ratio/C     the same maps on two pools side by side in one process, one in a durable
//                       context and one not, taken in turns: on_over_off is the median of each
//                       pair's ratio (the machine's speed moves between runs, much less between
//                       two maps in a row).
#include <benchmark/benchmark.h>
#include <fiber/fiber.hpp>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <numeric>
#include <utility>
#include <vector>

namespace {
struct pair16 {
  long a, b;
};
pair16 sixteen_bytes(long x) { return {x, -x}; }

std::filesystem::path scratch_folder() {
  return std::filesystem::temp_directory_path() / ("fiber-durable-bench-" + std::to_string(::getpid()));
}
}  // namespace
FIBER_REMOTE(sixteen_bytes);

static void journaled_map(benchmark::State& state) {
  static std::atomic<int> runs{0};
  bool journal = state.range(0) != 0;
  bool chunked = state.range(1) == 0;
  auto run_id = "bench-" + std::to_string(::getpid()) + "-" + std::to_string(++runs);
  std::vector<long> xs(chunked ? 100000 : 20000);
  std::iota(xs.begin(), xs.end(), 0L);
  std::size_t chunksize = chunked ? 0 : 1;
  {
    fiber::context ctx(fiber::config::load({{"record", "false"},
                                            {"durable", journal ? "true" : "false"},
                                            {"run_id", run_id},
                                            {"journal_dir", scratch_folder().string()}}));
    fiber::pool p(ctx, 4);
    p.ready().get();
    (void)p.map(&sixteen_bytes, xs, chunksize).get();  // warm-up
    for (auto _ : state) {
      auto r = p.map(&sixteen_bytes, xs, chunksize).get();
      if (r.back().a != static_cast<long>(xs.size()) - 1) state.SkipWithError("wrong result");
    }
    p.terminate().get();
  }  // the context's end syncs the journal
  state.counters["tasks_per_s"] = benchmark::Counter(static_cast<double>(xs.size()), benchmark::Counter::kIsIterationInvariantRate);
  auto journal_file = scratch_folder() / (run_id + ".journal");
  std::error_code ec;
  if (journal) {
    auto bytes = std::filesystem::file_size(journal_file, ec);
    state.counters["journal_bytes_per_item"] =
        ec ? -1.0 : static_cast<double>(bytes) / (static_cast<double>(xs.size()) * static_cast<double>(state.iterations() + 1));
  }
  std::filesystem::remove(journal_file, ec);
}
BENCHMARK(journaled_map)
    ->ArgsProduct({{0, 1}, {1, 0}})
    ->ArgNames({"J", "C"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(5)
    ->Repetitions(6);

static void journal_ratio(benchmark::State& state) {
  static std::atomic<int> runs{0};
  bool chunked = state.range(0) == 0;
  auto run_id = "bench-ratio-" + std::to_string(::getpid()) + "-" + std::to_string(++runs);
  std::vector<long> xs(chunked ? 100000 : 20000);
  std::iota(xs.begin(), xs.end(), 0L);
  std::size_t chunksize = chunked ? 0 : 1;
  auto options = [&](bool journal) {
    return fiber::config::load({{"record", "false"},
                                {"durable", journal ? "true" : "false"},
                                {"run_id", run_id},
                                {"journal_dir", scratch_folder().string()}});
  };
  std::vector<double> ratios;
  {
    fiber::context on(options(true)), off(options(false));
    fiber::pool p_on(on, 4), p_off(off, 4);
    p_on.ready().get();
    p_off.ready().get();
    auto timed = [&](fiber::pool& p) {
      auto t0 = std::chrono::steady_clock::now();
      auto r = p.map(&sixteen_bytes, xs, chunksize).get();
      if (r.back().a != static_cast<long>(xs.size()) - 1) state.SkipWithError("wrong result");
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    (void)timed(p_on);
    (void)timed(p_off);
    bool on_first = true;
    for (auto _ : state) {
      double t_on, t_off;
      if (on_first) {
        t_on = timed(p_on);
        t_off = timed(p_off);
      } else {
        t_off = timed(p_off);
        t_on = timed(p_on);
      }
      on_first = !on_first;
      ratios.push_back(t_on / t_off);
    }
    p_on.terminate().get();
    p_off.terminate().get();
  }
  std::sort(ratios.begin(), ratios.end());
  state.counters["on_over_off"] = ratios.empty() ? 0.0 : ratios[ratios.size() / 2];
  std::error_code ec;
  std::filesystem::remove(scratch_folder() / (run_id + ".journal"), ec);
}
BENCHMARK(journal_ratio)->Arg(0)->Arg(1)->ArgNames({"C"})->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(40);

