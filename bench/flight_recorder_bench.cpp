// The flight recorder's cost (its budget: 2 % of a core at 100,000 tasks a second).
//   record_event          one event appended (what a task costs twice: sent, done)
//   recorded_map/R        a map of 20,000 trivial tasks at chunksize 1 on pool(4), in a context
//                         that records (R = 1) or not (R = 0); run with
//                         --benchmark_enable_random_interleaving=true so the two alternate
//                         (docs/performance.md has the command)
//   manager_calls/S       2,000 calls to a manager's object, its server recording 1 in S of them
//                         (S = 0: none; 8: the default; 1: every one), interleaved like the maps
//   dashboard_map/D       the same map with the run's dashboard off (D = 0), on at its default
//                         interval of 500 ms (D = 1), and sampling every 50 ms (D = 2)
//   bound_a_full_folder/P what every run's start does to its recording folder (keep each program's
//                         newest record_keep), in a folder of 50 recordings of each of P programs
//                         (40: what the test suite leaves)
//   dashboard_sample/W    one sample of the page's state, serialized as it is sent, for a pool
//                         of W workers (its description made here as the pool makes its own)
#include <benchmark/benchmark.h>
#include <fiber/fiber.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <numeric>

#include <boost/json/serialize.hpp>

#include "core/flight_recorder.hpp"
#include "core/recording_folder.hpp"
#include "runtime/observe/dashboard_view.hpp"

namespace {
int identity(int x) { return x; }

class tally {
 public:
  int add(int k) { return n_ += k; }

 private:
  int n_ = 0;
};

std::string scratch_folder() {
  return (std::filesystem::temp_directory_path() / ("fiber-recorder-bench-" + std::to_string(::getpid()))).string();
}
}  // namespace
FIBER_REMOTE(identity);
FIBER_REMOTE_CLASS(tally, add);

static void record_event(benchmark::State& state) {
  fiber::detail::flight_recorder rec;
  rec.open(fiber::config::load({{"record_dir", scratch_folder()}, {"record_max_bytes", "1000000000000"}}), "bench");
  auto w = rec.name("PoolWorker-1-1");
  std::uint64_t task = 0;
  for (auto _ : state) rec.record(fiber::detail::record_kind::task_sent, w, 1, ++task, 1);
  rec.close();
  std::filesystem::remove_all(scratch_folder());
}
BENCHMARK(record_event)->Unit(benchmark::kNanosecond);

/// Maps 20,000 trivial tasks at chunksize 1 on pool(4) in a context configured by `cfg`.
void maps_of_20000(benchmark::State& state, const fiber::config& cfg) {
  fiber::context ctx(cfg);
  fiber::pool p(ctx, 4);
  p.ready().get();
  std::vector<int> xs(20000);
  std::iota(xs.begin(), xs.end(), 0);
  (void)p.map(&identity, xs, 1).get();  // warm-up
  for (auto _ : state) {
    auto r = p.map(&identity, xs, 1).get();
    if (r.back() != 19999) state.SkipWithError("wrong result");
  }
  state.counters["tasks_per_s"] = benchmark::Counter(static_cast<double>(xs.size()), benchmark::Counter::kIsIterationInvariantRate);
  p.terminate().get();
}

static void recorded_map(benchmark::State& state) {
  maps_of_20000(state, fiber::config::load({{"record", state.range(0) ? "true" : "false"}, {"record_dir", scratch_folder()}}));
}
BENCHMARK(recorded_map)->Arg(0)->Arg(1)->ArgName("R")->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(5)->Repetitions(6);

static void manager_calls(benchmark::State& state) {
  fiber::context ctx(fiber::config::load(
      {{"record_dir", scratch_folder()}, {"record_manager_calls", std::to_string(state.range(0))}}));
  fiber::manager mgr(ctx);
  auto t = mgr.create<tally>().get();
  (void)t.add(1).get();  // warm-up
  for (auto _ : state)
    for (int i = 0; i < 2000; ++i) benchmark::DoNotOptimize(t.add(1).get());
  state.counters["calls_per_s"] = benchmark::Counter(2000, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(manager_calls)->Arg(0)->Arg(8)->Arg(1)->ArgName("S")->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(5)->Repetitions(6);

static void dashboard_map(benchmark::State& state) {
  auto d = state.range(0);
  maps_of_20000(state, fiber::config::load({{"record", "false"},
                                            {"dashboard", d ? "true" : "false"},
                                            {"dashboard_interval_ms", d == 2 ? "50" : "500"}}));
}
BENCHMARK(dashboard_map)->Arg(0)->Arg(1)->Arg(2)->ArgName("D")->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(5)->Repetitions(6);

static void bound_a_full_folder(benchmark::State& state) {
  auto folder = scratch_folder();
  std::filesystem::create_directories(folder);
  for (int program = 0; program < state.range(0); ++program)
    for (int run = 0; run < 50; ++run) {
      auto name = fiber::detail::recording_file_name("20260101T0000" + std::to_string(10 + run) + "Z", "r" + std::to_string(run),
                                                     "program" + std::to_string(program));
      std::ofstream(folder + "/" + name) << std::string(4096, 'x');
    }
  for (auto _ : state) fiber::detail::keep_newest(folder, 50);
  std::filesystem::remove_all(folder);
}
BENCHMARK(bound_a_full_folder)->Arg(1)->Arg(40)->ArgName("programs")->Unit(benchmark::kMicrosecond);

// A view of one pool of `workers` and as many processes, its pool described as the pool's master
// describes itself.
static void fill_view(fiber::detail::dashboard_view& view, std::size_t workers) {
  view.add_pool(1, [workers](bool with_rows) -> std::optional<boost::json::object> {
    boost::json::object out{{"id", 1}, {"state", "open"}, {"target", workers}};
    out["stats"] = {{"queued", 100}, {"running", workers}, {"done", 123456}, {"retried", 0},
                    {"workers_lost", 0}, {"workers", workers}, {"workers_started", workers}};
    out["failures"] = boost::json::array{};
    if (!with_rows) return out;
    boost::json::array rows;
    for (std::size_t w = 0; w < std::min<std::size_t>(workers, 256); ++w)
      rows.push_back(boost::json::object{{"name", "PoolWorker-1-" + std::to_string(w + 1)},
                                         {"pid", 1000 + w}, {"state", "busy"}, {"items", 1}, {"done", 1000}});
    out["workers"] = std::move(rows);
    out["workers_total"] = workers;
    out["workers_shown"] = std::min<std::size_t>(workers, 256);
    return out;
  });
  for (std::size_t w = 0; w < workers; ++w)
    view.on_process(fiber::detail::record_kind::process_start, "PoolWorker-1-" + std::to_string(w + 1), 1000 + w, 0, {});
}

// What a page that reads the run costs at each tick: the whole state, as JSON.
static void dashboard_sample(benchmark::State& state) {
  fiber::detail::dashboard_view view("bench", "flight_recorder_bench", "local");
  fill_view(view, static_cast<std::size_t>(state.range(0)));
  std::size_t bytes = 0;
  for (auto _ : state) bytes = boost::json::serialize(view.sample()).size();
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(dashboard_sample)->Arg(4)->Arg(1024)->ArgName("W")->Unit(benchmark::kMicrosecond);

// What a tick costs when no page reads: the pools' numbers and a point of the plot.
static void dashboard_tick(benchmark::State& state) {
  fiber::detail::dashboard_view view("bench", "flight_recorder_bench", "local");
  fill_view(view, static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) view.tick();
}
BENCHMARK(dashboard_tick)->Arg(4)->Arg(1024)->ArgName("W")->Unit(benchmark::kMicrosecond);

// A run of 1,000,000 tasks on 64 workers (recorded here directly: sent, then done, round robin,
// one map), then its trace: the recording's and the trace's bytes, and the trace's writing time.
static void trace_of_a_million_tasks(benchmark::State& state) {
  auto cfg = fiber::config::load({{"record_dir", scratch_folder()}});
  std::string path;
  {
    fiber::detail::flight_recorder rec;
    rec.open(cfg, "million");
    path = rec.path();
    std::vector<std::uint32_t> workers;
    for (int w = 1; w <= 64; ++w) {
      workers.push_back(rec.name("PoolWorker-1-" + std::to_string(w)));
      rec.record(fiber::detail::record_kind::worker_up, workers.back(), 1, 1000 + w);
    }
    rec.record(fiber::detail::record_kind::pool_begin, 64, 1);
    rec.record(fiber::detail::record_kind::map_begin, 0, 1, 1, 1000000);
    for (std::uint64_t t = 1; t <= 1000000; ++t) {
      auto w = workers[t % workers.size()];
      rec.record(fiber::detail::record_kind::task_sent, w, 1, t, fiber::detail::task_sent_items(1, 1));
      rec.record(fiber::detail::record_kind::task_done, w, 1, t);
    }
    rec.record(fiber::detail::record_kind::pool_end, 0, 1);
  }
  auto out = scratch_folder() + "/million.trace.json";
  for (auto _ : state) {
    auto run = fiber::write_trace(path, out, cfg);
    if (run.tasks_done != 1000000) state.SkipWithError("the recording lost tasks");
  }
  state.counters["recording_MB"] = static_cast<double>(std::filesystem::file_size(path)) / 1e6;
  state.counters["trace_MB"] = static_cast<double>(std::filesystem::file_size(out)) / 1e6;
  std::filesystem::remove_all(scratch_folder());
}
BENCHMARK(trace_of_a_million_tasks)->Unit(benchmark::kSecond)->Iterations(1);
