// fiber's side of the cluster comparison (bench/compare/run.sh cluster): one row per run, on the
// backend FIBER_BACKEND names (slurm there), printed as `key=value` words that the peers' script
// (bench/compare/cluster/cluster_peers.py) prints too, so that run.sh sets them side by side.
//   cluster_bench ready N T0_NS           N workers ready; seconds since T0_NS (the launch, CLOCK_REALTIME)
//   cluster_bench overhead N MS TASKS     TASKS tasks of MS ms at chunksize 1: µs of overhead per task
//   cluster_bench throughput N TASKS      TASKS trivial tasks (default chunks): tasks per second
// Each run starts its own pool and ends it; the time to start it is the ready row's, not the others'.
#include <fiber/fiber.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

namespace {
int sleep_ms(int ms) {
  if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return ms;
}
int square(int x) { return x * x; }
}  // namespace
FIBER_REMOTE(sleep_ms);
FIBER_REMOTE(square);

namespace {
double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int usage() {
  std::fprintf(stderr, "usage: cluster_bench ready N T0_NS | overhead N MS TASKS | throughput N TASKS\n");
  return 2;
}
}  // namespace

int main(int argc, char** argv) {
  fiber::init(argc, argv);
  if (argc < 4) return usage();
  std::string row = argv[1];
  int n = std::atoi(argv[2]);
  if (n <= 0) return usage();
  if (row == "ready") {
    fiber::pool p(fiber::pool_options{.processes = n});
    p.ready().get();
    timespec now{};
    ::clock_gettime(CLOCK_REALTIME, &now);
    auto t0 = std::strtoll(argv[3], nullptr, 10);
    auto ns = static_cast<long long>(now.tv_sec) * 1000000000LL + now.tv_nsec - t0;
    std::printf("row=ready workers=%d seconds=%.3f\n", n, static_cast<double>(ns) / 1e9);
    return 0;
  }
  fiber::pool p(fiber::pool_options{.processes = n});
  p.ready().get();
  if (row == "overhead" && argc >= 5) {
    int ms = std::atoi(argv[3]), tasks = std::atoi(argv[4]);
    std::vector<int> args(static_cast<std::size_t>(tasks), ms);
    (void)p.map(&sleep_ms, std::vector<int>(static_cast<std::size_t>(n), 0), 1).get();  // every worker warm
    auto t0 = std::chrono::steady_clock::now();
    auto out = p.map(&sleep_ms, args, 1).get();
    double s = since(t0);
    double overhead_us = (s * n / tasks - ms / 1000.0) * 1e6;
    std::printf("row=overhead workers=%d task_ms=%d tasks=%d seconds=%.3f overhead_us=%.1f\n", n, ms, tasks, s, overhead_us);
    return out.size() == args.size() ? 0 : 1;
  }
  if (row == "throughput") {
    int tasks = std::atoi(argv[3]);
    std::vector<int> args(static_cast<std::size_t>(tasks));
    for (int i = 0; i < tasks; ++i) args[static_cast<std::size_t>(i)] = i;
    (void)p.map(&square, std::vector<int>(static_cast<std::size_t>(n), 1), 1).get();
    auto t0 = std::chrono::steady_clock::now();
    auto out = p.map(&square, args).get();
    double s = since(t0);
    std::printf("row=throughput workers=%d tasks=%d seconds=%.3f tasks_per_s=%.0f\n", n, tasks, s, tasks / s);
    return out.size() == args.size() ? 0 : 1;
  }
  return usage();
}
