// fiber's side of the cluster comparison (bench/compare/run.sh cluster): one row per run, on the
// backend FIBER_BACKEND names (slurm there), printed as `key=value` words that the peers' script
// (bench/compare/cluster/cluster_peers.py) prints too, so that run.sh sets them side by side.
//   cluster_bench ready N T0_NS           N workers ready; seconds since T0_NS (the launch, CLOCK_REALTIME)
//   cluster_bench overhead N MS TASKS     TASKS tasks of MS ms at chunksize 1: µs of overhead per task
//   cluster_bench throughput N TASKS      TASKS trivial tasks (default chunks): tasks per second
//   cluster_bench broadcast N MB          one MB-megabyte object read by a task on each worker
//                                         (fiber::share: one copy per host): seconds
//   cluster_bench args N COUNT MB         COUNT distinct MB-megabyte arguments, one task each: seconds
//   cluster_bench framework N ROUNDS MS   ROUNDS rounds of N tasks of MS ms (apply_async, the round's
//                                         results in before the next): µs of overhead per round
//   cluster_bench kill N TASKS MS DIR     TASKS tasks of MS ms; once a quarter are in, one running
//                                         worker's Slurm job is cancelled (scancel): whether the map
//                                         completes, how many tasks ran again, and its time beyond
//                                         the ideal. Each run of a task appends a line to DIR/runs.
//   cluster_bench load N SECONDS          a map of 100 ms tasks that lasts SECONDS on N workers; its
//                                         start and end (CLOCK_REALTIME ns), between which run.sh
//                                         counts the Slurm commands called (the controller's load)
// Each run starts its own pool and ends it; the time to start it is the ready row's, not the others'.
#include <fiber/fiber.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace {
int sleep_ms(int ms) {
  if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return ms;
}
int square(int x) { return x * x; }
double read_blob(const fiber::shared<std::span<const double>>& blob, int i) {
  return (*blob)[static_cast<std::size_t>(i) % blob->size()] + static_cast<double>(blob->size());
}
double arg_size(const std::vector<double>& v) { return static_cast<double>(v.size()) + v.front(); }
// A task of the kill row: appends its item and pid to DIR/runs (one line per run, reruns included), sleeps
// and says which Slurm job ran it, as scancel names one element of an array (ARRAY_TASK).
std::string logged_task(std::tuple<int, int, std::string> a) {
  auto& [item, ms, dir] = a;
  std::string line = std::to_string(item) + " " + std::to_string(::getpid()) + "\n";
  int fd = ::open((dir + "/runs").c_str(), O_WRONLY | O_APPEND | O_CREAT, 0600);
  if (fd >= 0) {
    (void)!::write(fd, line.data(), line.size());
    ::close(fd);
  }
  sleep_ms(ms);
  const char* array = std::getenv("SLURM_ARRAY_JOB_ID");
  const char* task = std::getenv("SLURM_ARRAY_TASK_ID");
  if (array && task) return std::string(array) + "_" + task;
  const char* job = std::getenv("SLURM_JOB_ID");
  return job ? job : "";
}
}  // namespace
FIBER_REMOTE(sleep_ms);
FIBER_REMOTE(square);
FIBER_REMOTE(read_blob);
FIBER_REMOTE(arg_size);
FIBER_REMOTE(logged_task);

namespace {
long long realtime_ns() {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<long long>(now.tv_sec) * 1000000000LL + now.tv_nsec;
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int usage() {
  std::fprintf(stderr,
               "usage: cluster_bench ready N T0_NS | overhead N MS TASKS | throughput N TASKS | broadcast N MB |\n"
               "                     args N COUNT MB | framework N ROUNDS MS | kill N TASKS MS DIR | load N SECONDS\n");
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
    auto ns = realtime_ns() - std::strtoll(argv[3], nullptr, 10);
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
  if (row == "broadcast") {
    auto doubles = static_cast<std::size_t>(std::atof(argv[3]) * 1e6 / sizeof(double));
    (void)p.map(&square, std::vector<int>(static_cast<std::size_t>(n), 1), 1).get();
    std::vector<double> blob(doubles, 1.0);
    auto t0 = std::chrono::steady_clock::now();
    auto shared = fiber::share(std::span<const double>(blob));
    std::vector<std::tuple<fiber::shared<std::span<const double>>, int>> tasks;
    for (int i = 0; i < n; ++i) tasks.emplace_back(shared, i);
    auto out = p.starmap(&read_blob, tasks, 1).get();
    double s = since(t0);
    std::printf("row=broadcast workers=%d mb=%s seconds=%.3f\n", n, argv[3], s);
    return out.size() == tasks.size() && out[0] == 1.0 + static_cast<double>(doubles) ? 0 : 1;
  }
  if (row == "args" && argc >= 5) {
    int count = std::atoi(argv[3]);
    auto doubles = static_cast<std::size_t>(std::atof(argv[4]) * 1e6 / sizeof(double));
    (void)p.map(&square, std::vector<int>(static_cast<std::size_t>(n), 1), 1).get();
    std::vector<std::vector<double>> payloads(static_cast<std::size_t>(count), std::vector<double>(doubles, 1.0));
    // The items given to the map (std::move), as a program that made them for it does; `kept`
    // (a fifth word) keeps them the caller's, which the map copies into its chunks.
    bool kept = argc >= 6 && std::string_view(argv[5]) == "kept";
    auto t0 = std::chrono::steady_clock::now();
    auto out = kept ? p.map(&arg_size, payloads, 1).get() : p.map(&arg_size, std::move(payloads), 1).get();
    double s = since(t0);
    std::printf("row=args workers=%d count=%d mb=%s seconds=%.3f%s\n", n, count, argv[4], s, kept ? " kept=1" : "");
    return out.size() == static_cast<std::size_t>(count) && out[0] == 1.0 + static_cast<double>(doubles) ? 0 : 1;
  }
  if (row == "framework" && argc >= 5) {
    int rounds = std::atoi(argv[3]), ms = std::atoi(argv[4]);
    (void)p.map(&sleep_ms, std::vector<int>(static_cast<std::size_t>(n), 0), 1).get();
    auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < rounds; ++r) {
      std::vector<fiber::op<int>> pending;
      for (int i = 0; i < n; ++i) pending.push_back(p.apply_async(&sleep_ms, ms));
      for (auto& o : pending) (void)std::move(o).get();
    }
    double s = since(t0);
    std::printf("row=framework workers=%d rounds=%d task_ms=%d seconds=%.3f overhead_us=%.1f\n", n, rounds, ms, s,
                (s / rounds - ms / 1000.0) * 1e6);
    return 0;
  }
  if (row == "load") {
    int seconds = std::atoi(argv[3]);
    std::vector<int> args(static_cast<std::size_t>(n) * static_cast<std::size_t>(seconds) * 10, 100);
    auto from = realtime_ns();
    auto out = p.map(&sleep_ms, args, 1).get();
    auto to = realtime_ns();
    std::printf("row=load workers=%d tasks=%zu seconds=%.3f map_from=%lld map_to=%lld\n", n, args.size(),
                static_cast<double>(to - from) / 1e9, from, to);
    return out.size() == args.size() ? 0 : 1;
  }
  if (row == "kill" && argc >= 6) {
    int tasks = std::atoi(argv[3]), ms = std::atoi(argv[4]);
    std::string dir = argv[5];
    (void)p.map(&sleep_ms, std::vector<int>(static_cast<std::size_t>(n), 0), 1).get();
    std::vector<std::tuple<int, int, std::string>> items;
    for (int i = 0; i < tasks; ++i) items.emplace_back(i, ms, dir);
    auto t0 = std::chrono::steady_clock::now();
    auto stream = p.imap_unordered(&logged_task, items, 1);
    int got = 0;
    std::string killed;
    try {
      for (const std::string& job : stream) {
        if (++got == tasks / 4) {
          killed = job;
          (void)!std::system(("scancel " + killed).c_str());
        }
      }
    } catch (const std::exception& e) {
      std::string what = e.what();
      for (char& c : what) c = c == ' ' ? '_' : c;
      std::printf("row=kill workers=%d tasks=%d task_ms=%d completed=no got=%d error=%s\n", n, tasks, ms, got, what.c_str());
      return 0;
    }
    double s = since(t0);
    std::ifstream runs(dir + "/runs");
    int ran = 0;
    for (std::string line; std::getline(runs, line);) ++ran;
    std::printf("row=kill workers=%d tasks=%d task_ms=%d completed=%s reruns=%d seconds=%.3f extra_s=%.3f job=%s\n", n,
                tasks, ms, got == tasks ? "yes" : "no", ran - tasks, s, s - tasks * ms / 1000.0 / n, killed.c_str());
    return 0;
  }
  return usage();
}
