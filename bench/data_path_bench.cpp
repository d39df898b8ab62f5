// The data path: the workloads the anchors in bench/compare/data_path.py run with
// multiprocessing, computed the same way.
//   es_round: an evolution-strategies generation, pool(4).map of 256 tasks, each the
//             generation's 10,000-double parameter vector and a seed, each returning a double;
//             the time of a generation includes building its tasks, as the Python side's does.
//             As in the Python program, every task refers to the one vector (a
//             shared_ptr<const vector<double>> here, one array object there), and it travels once
//             per chunk (fiber's shared_ptr, pickle's memo).
//   es_round_copies: the same with a copy of the vector in every task (256 × 80 KB per
//             generation built and sent): what a program gets that copies.
//   es_round_refs: the natural C++ form: every task holds a const reference to the one vector;
//             its bytes travel once per chunk (writer::share_ranges), as pickle's memo does.
//   es_round_shared: the explicit handle: each generation shares its vector once
//             (fiber::share), every task holds the handle; each worker gets the vector once per
//             generation (on this host, it maps the master's one copy), not once per chunk.
//   model_8MB_shared / model_8MB_span / model_8MB_refs: a fresh 1,000,000-double (8 MB) model
//             each map, read by 64 tasks on pool(4) (16 chunks): shared once (fiber::share, each
//             worker gets it once and decodes a copy), shared as a span (each worker reads the
//             host's one copy in place), against every task holding a const reference (it
//             travels once per chunk).
//   payload_8MB: pool(4).map of 64 tasks of a 1,000,000-double vector: MB/s of arguments.
#include <algorithm>
#include <benchmark/benchmark.h>
#include <fiber/fiber.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <cstdint>
#include <fstream>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace {
double es_evaluate(std::shared_ptr<const std::vector<double>> theta, std::uint64_t seed) {
  return (*theta)[seed % theta->size()] + static_cast<double>(seed);  // the work is not what is measured
}
double es_evaluate_copy(std::vector<double> theta, std::uint64_t seed) {
  return theta[seed % theta.size()] + static_cast<double>(seed);
}
double es_evaluate_ref(const std::vector<double>& theta, std::uint64_t seed) {
  return theta[seed % theta.size()] + static_cast<double>(seed);
}
double es_evaluate_shared(const fiber::shared<std::vector<double>>& theta, std::uint64_t seed) {
  return (*theta)[seed % theta->size()] + static_cast<double>(seed);
}
double model_probe(const fiber::shared<std::vector<double>>& model, std::uint64_t i) { return (*model)[i]; }
double model_probe_span(const fiber::shared<std::span<const double>>& model, std::uint64_t i) { return (*model)[i]; }
double model_probe_ref(const std::vector<double>& model, std::uint64_t i) { return model[i]; }
double payload_sum(std::vector<double> v) { return v.front() + v.back() + static_cast<double>(v.size()); }
}  // namespace
FIBER_REMOTE(es_evaluate);
FIBER_REMOTE(es_evaluate_copy);
FIBER_REMOTE(es_evaluate_ref);
FIBER_REMOTE(es_evaluate_shared);
FIBER_REMOTE(payload_sum);
FIBER_REMOTE(model_probe);
FIBER_REMOTE(model_probe_ref);
FIBER_REMOTE(model_probe_span);

namespace {

// One generation per iteration: `batch_of(theta, first_seed, tasks)` builds its tasks and `f`
// evaluates each; the next generation depends on this one's result.
template <class F, class BatchOf>
void es_generations(benchmark::State& state, F f, BatchOf batch_of) {
  const int workers = 4, tasks = 256, dim = 10000;
  fiber::pool p(workers);
  p.ready().get();
  std::vector<double> theta(dim);
  std::iota(theta.begin(), theta.end(), 0.0);
  std::uint64_t generation = 0;
  for (auto _ : state) {
    auto batch = batch_of(theta, generation * tasks, tasks);
    auto fitness = p.starmap(f, batch).get();
    benchmark::DoNotOptimize(fitness);
    theta[generation % dim] += 1e-3 * fitness[0];
    ++generation;
  }
}

void es_round(benchmark::State& state) {
  es_generations(state, &es_evaluate, [](const std::vector<double>& theta, std::uint64_t first, int tasks) {
    auto shared = std::make_shared<const std::vector<double>>(theta);  // this generation's parameters
    std::vector<std::tuple<std::shared_ptr<const std::vector<double>>, std::uint64_t>> batch;
    batch.reserve(tasks);
    for (int i = 0; i < tasks; ++i) batch.emplace_back(shared, first + i);
    return batch;
  });
}
// real_time is the time of one generation.
BENCHMARK(es_round)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(20)->Repetitions(3);

void es_round_copies(benchmark::State& state) {
  es_generations(state, &es_evaluate_copy, [](const std::vector<double>& theta, std::uint64_t first, int tasks) {
    std::vector<std::tuple<std::vector<double>, std::uint64_t>> batch;
    batch.reserve(tasks);
    for (int i = 0; i < tasks; ++i) batch.emplace_back(theta, first + i);
    return batch;
  });
}
BENCHMARK(es_round_copies)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(20)->Repetitions(3);

void es_round_refs(benchmark::State& state) {
  es_generations(state, &es_evaluate_ref, [](const std::vector<double>& theta, std::uint64_t first, int tasks) {
    std::vector<std::tuple<const std::vector<double>&, std::uint64_t>> batch;  // every task holds the one vector
    batch.reserve(tasks);
    for (int i = 0; i < tasks; ++i) batch.emplace_back(theta, first + i);
    return batch;
  });
}
BENCHMARK(es_round_refs)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(20)->Repetitions(3);

void es_round_shared(benchmark::State& state) {
  es_generations(state, &es_evaluate_shared, [](const std::vector<double>& theta, std::uint64_t first, int tasks) {
    auto shared = fiber::share(theta);  // this generation's parameters, shared once
    std::vector<std::tuple<fiber::shared<std::vector<double>>, std::uint64_t>> batch;
    batch.reserve(tasks);
    for (int i = 0; i < tasks; ++i) batch.emplace_back(shared, first + i);
    return batch;
  });
}
BENCHMARK(es_round_shared)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(20)->Repetitions(3);

template <class Tasks>
void model_maps(benchmark::State& state, Tasks tasks_of) {
  fiber::pool p(4);
  p.ready().get();
  std::vector<double> model(1'000'000, 0.5);
  double sum = 0;
  for (auto _ : state) {
    model[0] = sum;  // a new model each map
    auto r = tasks_of(p, model);
    sum = r[0];
  }
  state.SetBytesProcessed(state.iterations() * std::int64_t(model.size() * sizeof(double)));
}
void model_8MB_shared(benchmark::State& state) {
  model_maps(state, [](fiber::pool& p, const std::vector<double>& model) {
    auto shared = fiber::share(model);
    std::vector<std::tuple<fiber::shared<std::vector<double>>, std::uint64_t>> tasks;
    for (std::uint64_t i = 0; i < 64; ++i) tasks.emplace_back(shared, i);
    return p.starmap(&model_probe, tasks, 4).get();
  });
}
BENCHMARK(model_8MB_shared)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(20)->Repetitions(3);
void model_8MB_span(benchmark::State& state) {
  model_maps(state, [](fiber::pool& p, const std::vector<double>& model) {
    auto shared = fiber::share(std::span<const double>(model));
    std::vector<std::tuple<fiber::shared<std::span<const double>>, std::uint64_t>> tasks;
    for (std::uint64_t i = 0; i < 64; ++i) tasks.emplace_back(shared, i);
    return p.starmap(&model_probe_span, tasks, 4).get();
  });
}
BENCHMARK(model_8MB_span)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(20)->Repetitions(3);
void model_8MB_refs(benchmark::State& state) {
  model_maps(state, [](fiber::pool& p, const std::vector<double>& model) {
    std::vector<std::tuple<const std::vector<double>&, std::uint64_t>> tasks;
    for (std::uint64_t i = 0; i < 64; ++i) tasks.emplace_back(model, i);
    return p.starmap(&model_probe_ref, tasks, 4).get();
  });
}
BENCHMARK(model_8MB_refs)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(20)->Repetitions(3);

// Eight items holding one 100 MB vector on pool(2): by std::cref (arg 0) and by fiber::share
// (arg 1). master_peak_MB is this process's peak resident memory, so run each alone
// (--benchmark_filter=held_100MB_by/kind:0$, then :1$): the vector itself is 100 MB of it.
void held_100MB_by(benchmark::State& state) {
  fiber::pool p(2);
  p.ready().get();
  const bool shared = state.range(0) == 1;
  std::vector<double> model(12'500'000, 0.5);
  for (auto _ : state) {
    if (shared) {
      auto handle = fiber::share(model);
      std::vector<std::tuple<fiber::shared<std::vector<double>>, std::uint64_t>> tasks;
      for (std::uint64_t i = 0; i < 8; ++i) tasks.emplace_back(handle, i);
      benchmark::DoNotOptimize(p.starmap(&model_probe, tasks, 1).get());
    } else {
      std::vector<std::tuple<std::reference_wrapper<const std::vector<double>>, std::uint64_t>> tasks;
      for (std::uint64_t i = 0; i < 8; ++i) tasks.emplace_back(std::cref(model), i);
      benchmark::DoNotOptimize(p.starmap(&model_probe_ref, tasks, 1).get());
    }
  }
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  state.counters["master_peak_MB"] = static_cast<double>(u.ru_maxrss) / 1024;
}
BENCHMARK(held_100MB_by)->Arg(0)->Arg(1)->ArgName("kind")->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3)->Repetitions(1);

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

// The same, the items given to the map (std::move): their data is sent from where it is.
void payload_8MB_given(benchmark::State& state) {
  const int workers = 4, tasks = 64;
  const std::size_t n = 1'000'000;
  fiber::pool p(workers);
  p.ready().get();
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<std::vector<double>> payloads(tasks, std::vector<double>(n, 1.5));
    state.ResumeTiming();
    auto r = p.map(&payload_sum, std::move(payloads)).get();
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * tasks * n * sizeof(double));
}
BENCHMARK(payload_8MB_given)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3)->Repetitions(3);

/// CPU seconds (user + system) a process has used, from /proc; 0 once it is gone.
double cpu_seconds_of(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  auto close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 2));
  std::string skip;
  for (int i = 3; i < 14; ++i) fields >> skip;  // state .. cmajflt: fields 3-13
  double utime = 0, stime = 0;
  fields >> utime >> stime;
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}
double own_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto s = [](timeval t) { return t.tv_sec + t.tv_usec / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

/// This master's host hubs on this host (remote_transport=hub on the Slurm test cluster, whose
/// nodes share this host's processes): each names the master's pid in its unix name.
std::vector<int> my_hubs() {
  std::vector<int> out;
  const std::string key = "FIBER_WORKER_HUB=", tail = "-" + std::to_string(::getpid());
  for (auto& e : std::filesystem::directory_iterator("/proc")) {
    int pid = std::atoi(e.path().filename().c_str());
    if (pid <= 0) continue;
    std::ifstream cmd(e.path() / "cmdline");
    std::string args((std::istreambuf_iterator<char>(cmd)), {});
    if (args.find("--fiber-hub") == std::string::npos) continue;
    std::ifstream env(e.path() / "environ");
    std::string text((std::istreambuf_iterator<char>(env)), {});
    auto at = text.find(key);
    if (at == std::string::npos) continue;
    auto value = text.substr(at + key.size(), text.find('\0', at) - at - key.size());
    if (value.ends_with(tail)) out.push_back(pid);
  }
  return out;
}

/// What an idle pool costs: CPU seconds per second of the master and all its workers together
/// (and its host hubs, where it has them), over 5 s after every worker is ready
/// (multiprocessing's idle workers block in a read: ~0).
void idle_pool(benchmark::State& state) {
  const int workers = static_cast<int>(state.range(0));
  fiber::pool p(workers);
  p.ready().get();
  // The start's tail is not idle: each new worker samples its memory once and, with the page on,
  // sends it up, and a thousand such messages reach the master over the first seconds. The
  // window opens after them (a measurement's settling time, not a wait for an event).
  std::this_thread::sleep_for(std::chrono::seconds(3));
  for (auto _ : state) {
    auto pids = fiber::active_children();
    auto hubs = my_hubs();
    pids.insert(pids.end(), hubs.begin(), hubs.end());
    auto cpu = [&] {
      double total = own_cpu_seconds();
      for (int pid : pids) total += cpu_seconds_of(pid);
      return total;
    };
    // Reading a thousand stat files takes this process's own time: one reading's cost is what
    // the window's last reading adds, and is taken off.
    auto before = cpu();
    auto c0 = cpu();
    auto reading = c0 - before;
    auto own0 = own_cpu_seconds();
    auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::seconds(5));  // the measurement window, not a wait for an event
    auto wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto own1 = own_cpu_seconds();
    state.counters["cpu_s_per_s"] = std::max(0.0, cpu() - c0 - reading) / wall;
    // The master's share (its own reading, taken before the stat files are read).
    state.counters["master_cpu_s_per_s"] = (own1 - own0) / wall;
    state.counters["workers"] = static_cast<double>(pids.size() - hubs.size());
    state.counters["hubs"] = static_cast<double>(hubs.size());
    state.SetIterationTime(wall);
  }
}
// At 8, 128 and 1,024 workers, so that a wake-up in idle workers shows at any size (run it with
// FIBER_RECORD=1 FIBER_DASHBOARD=1 too: the recorder and the page must not wake them either).
BENCHMARK(idle_pool)->Arg(8)->Arg(128)->Arg(1024)->ArgName("W")->UseManualTime()->Unit(benchmark::kSecond)->Iterations(1)->Repetitions(1);

}  // namespace
