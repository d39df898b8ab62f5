// What one worker costs its master, the per-unit figures of the envelope (docs/design.md, "The
// envelope of one master"; bench/compare/envelope.py extrapolates them): on a pool of W workers,
// ready and after a map of 8W trivial tasks of chunksize 1,
//   fds_per_worker         file descriptors the master opened per worker
//   master_kB_per_worker   the master's resident memory grown per worker
//   worker_pss_kB          a worker's proportional set size (its shared pages divided among those
//                          sharing them: what each adds to its host)
//   master_cpu_us_per_task the master's CPU time per task (user + system)
//   wall_us_per_task       the map's wall time per task
// Under FIBER_BACKEND=slurm (bench/compare/run.sh envelope) the workers are on the test cluster's
// nodes and reach the master as FIBER_REMOTE_TRANSPORT says (TLS direct links, host hubs, or
// ZeroMQ with CURVE); locally, over direct links.
#include <benchmark/benchmark.h>
#include <fiber/fiber.hpp>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {
int echo(int x) { return x; }

int open_fds() {
  int n = 0;
  for (auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)e;
    ++n;
  }
  return n;
}
/// A field of /proc/<pid>/status or smaps_rollup, in kB; 0 when the process is gone (or not on
/// this host).
double kb_field(const std::string& path, const std::string& field) {
  std::ifstream in(path);
  std::string name;
  double kb = 0;
  while (in >> name) {
    if (name == field + ":") {
      in >> kb;
      return kb;
    }
    in.ignore(1 << 12, '\n');
  }
  return 0;
}
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto s = [](timeval t) { return t.tv_sec + t.tv_usec / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}
}  // namespace
FIBER_REMOTE(echo);

static void envelope(benchmark::State& state) {
  const int workers = static_cast<int>(state.range(0));
  for (auto _ : state) {
    int fds0 = open_fds();
    double rss0 = kb_field("/proc/self/status", "VmRSS");
    fiber::pool p(workers);
    p.ready().get();
    std::vector<int> xs(static_cast<std::size_t>(workers) * 8);
    p.map(&echo, xs, 1).get();  // every worker connected and used once before the measurement
    int fds1 = open_fds();
    double rss1 = kb_field("/proc/self/status", "VmRSS");
    double pss = 0;
    int seen = 0;
    for (int pid : fiber::active_children()) {
      double kb = kb_field("/proc/" + std::to_string(pid) + "/smaps_rollup", "Pss");
      if (kb > 0) pss += kb, ++seen;
    }
    // ENVELOPE_TASKS: tasks per worker in the measured map (8), more for a profile of it
    if (const char* n = std::getenv("ENVELOPE_TASKS")) {
      xs.resize(static_cast<std::size_t>(workers) * std::atoi(n));
      std::fprintf(stderr, "envelope: measuring %d workers\n", workers);  // a profiler's cue
    }
    auto c0 = cpu_seconds();
    auto t0 = std::chrono::steady_clock::now();
    p.map(&echo, xs, 1).get();
    auto wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto cpu = cpu_seconds() - c0;
    state.SetIterationTime(wall);
    state.counters["fds_per_worker"] = double(fds1 - fds0) / workers;
    state.counters["master_kB_per_worker"] = (rss1 - rss0) / workers;
    state.counters["worker_pss_kB"] = seen ? pss / seen : 0;  // 0: the workers are on other hosts
    state.counters["master_cpu_us_per_task"] = cpu * 1e6 / double(xs.size());
    state.counters["wall_us_per_task"] = wall * 1e6 / double(xs.size());
    state.PauseTiming();
    p.terminate().get();
    state.ResumeTiming();
  }
}
// ENVELOPE_WORKERS=N: that pool size only (a cluster's fill), else 8 to 1,024.
static void worker_counts(benchmark::internal::Benchmark* b) {
  if (const char* n = std::getenv("ENVELOPE_WORKERS")) return void(b->Arg(std::atoi(n)));
  for (int w : {8, 64, 256, 1024}) b->Arg(w);
}
BENCHMARK(envelope)->Apply(worker_counts)->ArgName("W")->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(1)->Repetitions(1);
