// What the process suites share: the functions their children run, registered once per test binary.
#pragma once
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <fiber/fiber.hpp>
#include <gtest/gtest.h>

#include "docker_support.hpp"
#include "co_test.hpp"
#include "slurm_support.hpp"
#include "kubernetes_support.hpp"
#include "runtime/trust/job_security.hpp"
#include "support.hpp"

#include <poll.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>
#include <fstream>
#include <sstream>


namespace {
// The mark (host:pid) a master with pid `master` on this host puts on its containers, pods and jobs.
std::string mark_of(pid_t master) {
  auto mine = fiber_test::master_label();
  return mine.substr(0, mine.rfind(':') + 1) + std::to_string(master);
}
// Starts the test program orphan_master (a master that starts one child and waits to be killed;
// `mode` "nested": its child starts a grandchild) and reads the `count` pids it prints, child
// first; `master` is its pid. Fewer pids when it printed fewer.
std::vector<int> start_orphan_master(const char* mode, int count, pid_t& master) {
  int out[2];
  if (pipe(out) != 0) return {};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  char* argv[] = {const_cast<char*>(FIBER_TEST_ORPHAN_MASTER), const_cast<char*>(mode), nullptr};
  bool started = posix_spawn(&master, FIBER_TEST_ORPHAN_MASTER, &actions, nullptr, argv, environ) == 0;
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  std::string text;
  char buf[64];
  for (ssize_t n; started && std::count(text.begin(), text.end(), '\n') < count && (n = read(out[0], buf, sizeof buf)) > 0;)
    text.append(buf, static_cast<std::size_t>(n));
  close(out[0]);
  std::vector<int> pids;
  std::istringstream lines(text);
  for (int pid; pids.size() < static_cast<std::size_t>(count) && lines >> pid;) pids.push_back(pid);
  return pids;
}
// No container, Slurm job or pod of the master `master` is left on the backend under test.
void expect_nothing_left_of(pid_t master) {
  auto owner = mark_of(master);
  if (fiber_test::on_docker()) EXPECT_TRUE(fiber_test::containers_of(owner).empty());
  if (fiber_test::on_slurm()) EXPECT_TRUE(fiber_test::live_slurm_jobs_of(owner).empty());
  if (fiber_test::on_kubernetes()) EXPECT_TRUE(fiber_test::pods_of(owner).empty());
}
void do_nothing() {}
void fail_with(std::string message) { throw std::runtime_error(message); }
void exit_with(int code) { std::exit(code); }
// Blocks until something arrives on `gate`: a child that is "busy" without sleeping.
void wait_on(fiber::simple_queue<int> gate) { (void)gate.get().get(); }
// Waits for `gate`, then creates the file `marker`: proof that it ran to its end.
void wait_then_touch(fiber::simple_queue<int> gate, std::string marker) {
  (void)gate.get().get();
  std::FILE* f = std::fopen(marker.c_str(), "w");
  if (!f) throw std::runtime_error("cannot create " + marker);
  std::fclose(f);
}
void report_identity(fiber::simple_queue<std::string> out) {
  auto me = fiber::current_process();
  out.put(me.name + " " + std::to_string(me.pid) + " " + (me.is_worker ? "worker" : "master")).get();
}
void report_config(fiber::simple_queue<std::vector<std::pair<std::string, std::string>>> out) {
  out.put(fiber::context::default_context().config().items()).get();
}
// Ignores SIGTERM, then waits on the gate: only SIGKILL ends it early.
void ignore_sigterm_and_wait(fiber::simple_queue<int> gate, fiber::simple_queue<int> ready) {
  std::signal(SIGTERM, SIG_IGN);
  ready.put(1).get();
  (void)gate.get().get();
}
void crash() { std::abort(); }
// Fails unless it sees exactly the devices its FIBER_META asked for (local backend: from 0).
void expect_two_gpus() {
  auto* v = std::getenv("CUDA_VISIBLE_DEVICES");
  if (!v || std::string(v) != "0,1") throw std::runtime_error(std::string("sees ") + (v ? v : "no devices"));
}
// Tries to start a process from inside a worker; reports the error and whether it looks alive.
void start_from_worker(fiber::simple_queue<std::string> out) {
  fiber::process p(&crash);
  std::string report;
  try {
    p.start().get();
    report = "started";
  } catch (const fiber::error& e) {
    report = e.what();
  }
  out.put(report + (p.is_alive() ? " | alive" : " | not alive")).get();
}
void raise_usr1() { std::raise(SIGUSR1); }  // default action: terminate
// Threads and a recursive mutex in a child (a forked child must have sane thread state).
void use_threads(fiber::simple_queue<int> out) {
  std::recursive_mutex m;
  int total = 0;
  std::vector<std::thread> ts;
  for (int i = 1; i <= 4; ++i)
    ts.emplace_back([&, i] {
      std::lock_guard a(m);
      std::lock_guard b(m);
      total += i;
    });
  for (auto& t : ts) t.join();
  out.put(total).get();
}
// A move-only parameter by value: the decoded argument is moved into it in the child.
void take_ownership(std::unique_ptr<std::string> s, fiber::simple_queue<std::string> out) {
  auto mine = std::move(s);
  out.put(mine ? *mine + "!" : "(none)").get();
}
}  // namespace
FIBER_REMOTE(do_nothing);
FIBER_REMOTE(fail_with);
FIBER_REMOTE(exit_with);
FIBER_REMOTE(wait_on);
FIBER_REMOTE(wait_then_touch);
FIBER_REMOTE(report_identity);
FIBER_REMOTE(report_config);
FIBER_REMOTE(ignore_sigterm_and_wait);
FIBER_REMOTE(crash);
FIBER_REMOTE(start_from_worker);
FIBER_REMOTE(raise_usr1);
FIBER_REMOTE(use_threads);
FIBER_REMOTE(take_ownership);
FIBER_REMOTE(expect_two_gpus);
FIBER_META(expect_two_gpus, .gpu = 2);
