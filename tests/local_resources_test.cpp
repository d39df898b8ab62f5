// What local children get: GPUs as slots of their own (waiting while all are taken), CPUs by
// affinity, resident memory watched by the master; and requests the host can never meet failing at
// once.
#include <fiber/fiber.hpp>
#include <gtest/gtest.h>

#include <asio/io_context.hpp>
#include <csignal>
#include <optional>
#include <sched.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "backend/backend.hpp"
#include "backend/local/local_resources.hpp"
#include "support.hpp"

using fiber::detail::gpu_inventory;
using fiber::detail::local_resources;
using fiber::detail::spawn_spec;

namespace {
spawn_spec asking(int gpu, int cpu = 1, bool cpu_declared = false) {
  spawn_spec s;
  s.name = "Process-test";
  s.gpu = gpu;
  s.cpu = cpu;
  s.cpu_declared = cpu_declared;
  return s;
}

// Says which child it is and which devices it sees, then holds them until released.
void hold_gpu(int index, fiber::simple_queue<std::string> report, fiber::simple_queue<int> release) {
  auto* v = std::getenv("CUDA_VISIBLE_DEVICES");
  report.put(std::to_string(index) + " " + (v ? v : "")).get();
  release.get().get();
}
void want_three_gpus() {}
int cpus_seen() {
  cpu_set_t set;
  sched_getaffinity(0, sizeof set, &set);
  return CPU_COUNT(&set);
}
void allocate_mb(int mb) {
  std::vector<char> block(static_cast<std::size_t>(mb) << 20, 1);  // touches every page
  if (block.back() != 1) throw std::runtime_error("unreachable");
}
}  // namespace
FIBER_REMOTE(hold_gpu);
FIBER_META(hold_gpu, .gpu = 1);
FIBER_REMOTE(want_three_gpus);
FIBER_META(want_three_gpus, .gpu = 3);
FIBER_REMOTE(cpus_seen);
FIBER_META(cpus_seen, .cpu = 1);
FIBER_REMOTE(allocate_mb);
FIBER_META(allocate_mb, .memory_mb = 256);

// ---- the slots themselves

TEST(local_resources, gpus_are_handed_out_once_and_come_back) {
  local_resources r(gpu_inventory{{"0", "1"}, "test"}, {0, 1});
  auto a = r.try_take(asking(1)), b = r.try_take(asking(1));
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->gpus, b->gpus);
  EXPECT_FALSE(r.try_take(asking(1)));  // both taken
  r.give_back(*a);
  auto c = r.try_take(asking(1));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->gpus, a->gpus);
}

// Looking for GPUs loads the driver (NVML's init, or `nvidia-smi`): a program whose children ask
// for none never does, and one that asks looks once.
TEST(local_resources, the_gpus_are_looked_for_once_and_only_when_a_child_asks_for_one) {
  int looked = 0;
  local_resources r(
      [&] {
        ++looked;
        return gpu_inventory{{"0"}, "test"};
      },
      {0, 1});
  r.check(asking(0, 2, true));
  auto cpu_only = r.try_take(asking(0, 1, true));
  ASSERT_TRUE(cpu_only);
  r.give_back(*cpu_only);
  EXPECT_EQ(looked, 0);
  r.check(asking(1));
  auto a = r.try_take(asking(1));
  EXPECT_FALSE(r.try_take(asking(1)));
  ASSERT_TRUE(a);
  EXPECT_EQ(a->gpus, std::vector<std::string>{"0"});
  EXPECT_EQ(r.gpus().ids.size(), 1u);
  EXPECT_EQ(looked, 1);
}

TEST(local_resources, a_request_larger_than_the_host_fails_at_once_naming_both) {
  local_resources r(gpu_inventory{{"0", "1"}, "config gpus=0,1"}, {0, 1});
  fiber_test::expect_error([&] { r.check(asking(3)); }, fiber::errc::unsatisfiable, "asks for 3 GPUs and this host has 2");
  fiber_test::expect_error([&] { r.check(asking(0, 3, true)); }, fiber::errc::unsatisfiable, "asks for 3 CPUs");
  local_resources none(gpu_inventory{{}, "no NVIDIA driver found"}, {0});
  fiber_test::expect_error([&] { none.check(asking(1)); }, fiber::errc::unsatisfiable, "no NVIDIA driver found");
  EXPECT_NO_THROW(r.check(asking(2, 2, true)));
}

TEST(local_resources, declared_cpus_spread_over_the_least_used_ones) {
  local_resources r(gpu_inventory{}, {2, 3, 5});
  auto a = r.try_take(asking(0, 2, true)), b = r.try_take(asking(0, 1, true));
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->cpus, (std::vector<int>{2, 3}));
  EXPECT_EQ(b->cpus, std::vector<int>{5});
  EXPECT_TRUE(r.try_take(asking(0, 1, false))->cpus.empty());  // nothing declared: not pinned
  r.give_back(*a);
  EXPECT_EQ(r.try_take(asking(0, 1, true))->cpus, std::vector<int>{2});
}

TEST(local_resources, waiting_starts_go_in_order_when_gpus_come_back) {
  local_resources r(gpu_inventory{{"0"}, "test"}, {0});
  auto held = r.try_take(asking(1));
  std::vector<int> started;
  for (int i = 0; i < 2; ++i)
    r.wait([&, i] {
      auto g = r.try_take(asking(1));
      if (!g) return false;
      started.push_back(i);
      return true;
    });
  auto cancelled = r.wait([&] {
    started.push_back(99);
    return true;
  });
  r.cancel(cancelled);
  r.start_waiting();
  EXPECT_TRUE(started.empty());  // nothing free yet
  r.give_back(*held);
  r.start_waiting();
  EXPECT_EQ(started, std::vector<int>{0});  // the first in line; the second waits for it
}

// ---- children

TEST(local_resources, children_asking_for_a_gpu_each_take_turns_on_devices_of_their_own) {
  FIBER_TEST_LOCAL_ONLY("GPU slots are the local backend's");
  fiber::context ctx(fiber::config::load({{"gpus", "0,1"}}));
  fiber::simple_queue<std::string> report(ctx);
  std::vector<fiber::simple_queue<int>> release;
  std::vector<std::unique_ptr<fiber::process>> children;
  for (int i = 0; i < 4; ++i) {
    release.emplace_back(ctx);
    children.push_back(std::make_unique<fiber::process>(ctx, &hold_gpu, i, report, release.back()));
  }
  std::vector<std::thread> starting;
  for (auto& c : children) starting.emplace_back([&c] { c->start().get(); });
  std::map<std::string, int> holder;  // device -> child
  auto next_report = [&] {
    auto r = report.get().get();
    auto space = r.find(' ');
    return std::pair{std::stoi(r.substr(0, space)), r.substr(space + 1)};
  };
  for (int k = 0; k < 2; ++k) {
    auto [child, device] = next_report();
    EXPECT_FALSE(holder.count(device)) << "device " << device << " given twice";
    holder[device] = child;
  }
  EXPECT_EQ(holder.size(), 2u);
  EXPECT_TRUE(holder.count("0") && holder.count("1"));
  int waiting = 0;
  for (auto& c : children) waiting += c->pid() == 0;
  EXPECT_EQ(waiting, 2) << "two children wait for a device, not started";
  // Each release frees one known device; the next child to run gets exactly that one.
  for (std::string device : {"0", "1"}) {
    int done = holder[device];
    release[done].put(1).get();
    children[done]->join().get();
    auto [child, seen] = next_report();
    EXPECT_EQ(seen, device) << "child " << child << " got another child's device";
    holder[device] = child;
  }
  for (auto& [device, child] : holder) release[child].put(1).get();
  for (auto& t : starting) t.join();
  for (auto& c : children) {
    c->join().get();
    EXPECT_EQ(c->exitcode(), 0);
  }
  fiber::process three(ctx, &want_three_gpus);
  fiber_test::expect_error([&] { three.start().get(); }, fiber::errc::unsatisfiable, "asks for 3 GPUs and this host has 2");
}

TEST(local_resources, a_child_signalled_while_it_waits_for_a_gpu_ends_unstarted_and_the_holder_runs_on) {
  FIBER_TEST_LOCAL_ONLY("GPU slots are the local backend's");
  asio::io_context io;
  auto cfg = fiber::config::load({{"gpus", "0"}});
  auto engine = fiber::detail::make_local_backend(io, cfg);
  fiber::detail::spawn_spec spec;
  spec.name = "child";
  spec.executable = "/bin/sleep";
  spec.args = {"600"};
  spec.gpu = 1;
  auto holder = engine->spawn(spec);
  auto waiter = engine->spawn(spec);
  ASSERT_GT(holder->pid(), 0);
  EXPECT_EQ(waiter->pid(), 0) << "the only GPU is taken: it waits, unstarted";
  std::optional<int> ended;
  bool ran = false;
  waiter->on_exit([&](int code) { ended = code; });
  waiter->when_running([&] { ran = true; });
  waiter->signal(SIGTERM);
  EXPECT_FALSE(ended) << "its end comes from the loop, not from inside the signal";
  while (!ended) io.run_one();
  EXPECT_EQ(*ended, -SIGTERM);
  EXPECT_FALSE(ran) << "it never ran";
  EXPECT_NE(waiter->exit_detail().find("still waiting for a free GPU"), std::string::npos) << waiter->exit_detail();
  EXPECT_EQ(::kill(holder->pid(), 0), 0) << "the holder runs on";
  holder->kill_and_reap();
}

TEST(local_resources, a_child_sees_the_cpus_it_asked_for) {
  FIBER_TEST_LOCAL_ONLY("affinity is the local backend's");
  fiber::pool pool({.processes = 1, .needs = {.cpu = 1}});
  EXPECT_EQ(pool.apply(&cpus_seen).get(), 1);
}

TEST(local_resources, a_child_touching_memory_past_its_limit_is_stopped_and_one_within_it_is_not) {
  FIBER_TEST_LOCAL_ONLY("the master's memory watch is the local backend's limit");
  fiber::process within(&allocate_mb, 64), beyond(&allocate_mb, 1024);
  within.start().get();
  beyond.start().get();
  within.join().get();
  beyond.join().get();
  EXPECT_EQ(within.exitcode(), 0);
  EXPECT_EQ(beyond.exitcode(), -SIGKILL) << "stopped by the watch, not by a failed allocation";
  EXPECT_FALSE(beyond.exception()) << "nothing raised: it was stopped";
}
