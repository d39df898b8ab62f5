// What the pool suites share: the functions their workers run, registered once per test binary.
#pragma once
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <fiber/fiber.hpp>
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <algorithm>
#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <ranges>
#include <optional>
#include <thread>

#include "folder_wait.hpp"
#include "support.hpp"

namespace {
// Wraps past INT_MAX (the long inputs' squares do) rather than overflow, which is undefined.
int square(int x) { return static_cast<int>(static_cast<unsigned>(x) * static_cast<unsigned>(x)); }
int add(int a, int b) { return a + b; }
// An evolution-strategies task: every item of a generation points to the same parameters.
double perturbed_sum(std::shared_ptr<const std::vector<double>> theta, std::uint64_t seed) {
  return std::accumulate(theta->begin(), theta->end(), 0.0) + static_cast<double>(seed);
}
// Which worker ran a task: its process name, unique in a context on every backend (pids repeat
// across containers).
std::string me() { return fiber::current_process().name; }
std::string my_name(int) { return me(); }
void nothing(int) {}
int sleep_ms(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));  // the task's work, not synchronization
  return ms;
}
int fail_on_multiples_of_20(int x) {
  if (x % 20 == 0) throw std::invalid_argument("multiple of 20: " + std::to_string(x));
  return x;
}
// Each task reports its worker and then waits for a release: only possible if tasks that are
// running at the same time are on different workers.
int meet(int, fiber::simple_queue<std::string> arrived, fiber::simple_queue<int> release) {
  arrived.put(me()).get();
  return release.get().get();
}
// Creates `marker` (once, atomically) and then dies by `sig`; when it exists, returns x.
int die_once(int x, std::string marker, int sig) {
  int fd = ::open(marker.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);
  if (fd >= 0) {
    ::close(fd);
    ::raise(sig);
    if (sig == SIGSTOP) ::pause();  // stay stopped even if someone continues us
  }
  return x;
}
// The sum of `theta` plus `seed`; the first run of item `die_at` dies (as die_once).
double sum_or_die_once(const std::vector<double>& theta, std::uint64_t seed, std::uint64_t die_at, std::string marker) {
  if (seed == die_at) (void)die_once(0, marker, SIGKILL);
  return std::accumulate(theta.begin(), theta.end(), 0.0) + static_cast<double>(seed);
}
// Crashes its worker each time (a crash is the item's doing: charged an attempt, where a SIGKILL
// from outside is not).
int always_die(int) {
  ::raise(SIGSEGV);
  return 0;
}
// Logs each run of item `x` as a line of `log`. The first time item `stop_at` runs, it says so on
// `arrived`, waits for `release`, and dies: what ran before it was reported, or not.
int run_logged(int x, std::string log, int stop_at, std::string marker, fiber::simple_queue<int> arrived,
               fiber::simple_queue<int> release) {
  auto line = std::to_string(x) + "\n";
  int fd = ::open(log.c_str(), O_CREAT | O_APPEND | O_WRONLY, 0600);
  if (fd < 0 || ::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) std::abort();
  ::close(fd);
  if (x == stop_at && (fd = ::open(marker.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600)) >= 0) {
    ::close(fd);
    arrived.put(x).get();
    (void)release.get().get();
    ::raise(SIGKILL);
  }
  return x;
}
// How many times each item ran, from run_logged's log.
std::map<int, int> runs_in(const std::string& log) {
  std::map<int, int> runs;
  std::ifstream in(log);
  for (int x; in >> x;) ++runs[x];
  return runs;
}
// Crashes every time it runs item 17.
int die_at_17(int x) {
  if (x == 17) ::raise(SIGSEGV);
  return x;
}
// Dies the first time it runs each item of `kills` (a marker per item under `prefix`).
int die_once_at(int x, std::string prefix, std::vector<int> kills) {
  if (std::find(kills.begin(), kills.end(), x) != kills.end()) {
    int fd = ::open((prefix + std::to_string(x)).c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);
    if (fd >= 0) ::raise(SIGKILL);
  }
  return x;
}
// Notes "x pid" in `dir`/started as it begins; item 0 then waits until `dir`/gate exists (each
// change of `dir` looked at, never on a timer). Returns x * x.
int noted_then_gated(int x, std::string dir) {
  auto line = std::to_string(x) + " " + std::to_string(::getpid()) + "\n";
  int fd = ::open((dir + "/started").c_str(), O_CREAT | O_APPEND | O_WRONLY, 0600);
  if (fd < 0 || ::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) std::abort();
  ::close(fd);
  if (x == 0) fiber_test::wait_in(dir, [&] { return std::filesystem::exists(dir + "/gate"); });
  return x * x;
}
// Never returns on its own: a task only its timeout ends.
int hang(int x) {
  for (;;) ::pause();
  return x;
}
// Says it runs on `arrived`, then never returns: a task only cancelling (or a timeout) ends.
int arrive_and_hang(int x, fiber::simple_queue<int> arrived) {
  arrived.put(x).get();
  for (;;) ::pause();
  return x;
}
// Item 0 raises at once; the others wait for a token from `gate`.
int fail_zero_or_wait(int x, fiber::simple_queue<int> gate) {
  if (x == 0) throw std::invalid_argument("item zero fails");
  return x + gate.get().get();
}
// Hangs for a negative x; squares the others.
int hang_or_square(int x) {
  if (x < 0)
    for (;;) ::pause();
  return x * x;
}
// Hangs the first time (`marker` absent), returns x after.
int hang_once(int x, std::string marker) {
  int fd = ::open(marker.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);
  if (fd >= 0)
    for (;;) ::pause();
  return x;
}
int fiber_test_unregistered(int x) { return x; }
// Large arguments and results travel as frames of their own inside a packed chunk.
std::vector<double> scale_big(std::vector<double> v) {
  if (v.size() == 3) throw std::length_error("three is not allowed");
  for (auto& x : v) x *= 2;
  return v;
}
std::string make_big(int n) { return std::string(static_cast<std::size_t>(n), 'x'); }
int initialized_value = 0;
void set_value(int v) { initialized_value = v; }
int read_value(int) { return initialized_value; }

// Where a task ran and which devices it could see: "pid gpus".
std::string where_plain(int) {
  auto* v = std::getenv("CUDA_VISIBLE_DEVICES");
  return me() + " " + (v && *v ? v : "none");
}
std::string where_gpu(int x) { return where_plain(x); }
std::string where_three_gpus(int x) { return where_plain(x); }
// Declares what every worker has anyway (cpu_per_job is 1 by default).
int square_on_one_cpu(int x) { return x * x; }

std::set<std::string> workers_of(const std::vector<std::string>& where) {
  std::set<std::string> pids;
  for (auto& w : where) pids.insert(w.substr(0, w.find(' ')));
  return pids;
}
std::set<std::string> gpus_of(const std::vector<std::string>& where) {
  std::set<std::string> gpus;
  for (auto& w : where) gpus.insert(w.substr(w.find(' ') + 1));
  return gpus;
}

std::string marker_path(const char* name) {
  auto p = fiber_test::run_folder() /
           ("fiber-pool-" + std::to_string(getpid()) + "-" + name);
  std::filesystem::remove(p);
  return p.string();
}
// A move-only parameter by value: the argument is moved into it in the worker.
std::size_t length_of(std::unique_ptr<std::string> s) { return s ? s->size() : 0; }
}  // namespace
FIBER_REMOTE(length_of);
FIBER_REMOTE(square);
FIBER_REMOTE(add);
FIBER_REMOTE(perturbed_sum);
FIBER_REMOTE(my_name);
FIBER_REMOTE(nothing);
FIBER_REMOTE(sleep_ms);
FIBER_REMOTE(fail_on_multiples_of_20);
FIBER_REMOTE(meet);
FIBER_REMOTE(die_once);
FIBER_REMOTE(always_die);
FIBER_REMOTE(sum_or_die_once);
FIBER_REMOTE(run_logged);
FIBER_REMOTE(die_at_17);
FIBER_REMOTE(die_once_at);
FIBER_REMOTE(noted_then_gated);
FIBER_REMOTE(hang);
FIBER_REMOTE(hang_or_square);
FIBER_REMOTE(arrive_and_hang);
FIBER_REMOTE(fail_zero_or_wait);
FIBER_REMOTE(hang_once);
FIBER_REMOTE(set_value);
FIBER_REMOTE(read_value);
FIBER_REMOTE(scale_big);
FIBER_REMOTE(make_big);
FIBER_REMOTE(where_plain);
FIBER_REMOTE(where_gpu);
FIBER_META(where_gpu, .gpu = 1);
FIBER_REMOTE(where_three_gpus);
FIBER_META(where_three_gpus, .gpu = 3);
FIBER_REMOTE(square_on_one_cpu);
FIBER_META(square_on_one_cpu, .cpu = 1);

