// Managers: (a) the cost of one call on a CartPole proxy, physics only, sync and async; (b) the
// sync-vs-async harness of the multiprocessing anchor managers.py (bench/compare/run.sh runs both):
// 4 envs on 4 managers, 200 steps each, every step costing a 1 ms sleep, overheads computed alike.
#include <benchmark/benchmark.h>
#include <fiber/fiber.hpp>

#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "../examples/cartpole.hpp"

namespace {
using clock_type = std::chrono::steady_clock;
constexpr int num_envs = 4;

double measured_sleep_s(int us) {
  auto t0 = clock_type::now();
  for (int i = 0; i < 300; ++i) std::this_thread::sleep_for(std::chrono::microseconds(us));
  return std::chrono::duration<double>(clock_type::now() - t0).count() / 300;
}

// (a) one sync call per iteration: the round trip plus the physics of one step.
void manager_call_sync(benchmark::State& state) {
  fiber::manager mgr;
  auto env = mgr.create<cartpole>(std::uint64_t(1)).get();
  (void)env.reset().get();
  int action = 0;
  for (auto _ : state) {
    if (env.step(action ^= 1).get().done) (void)env.reset().get();
  }
}
BENCHMARK(manager_call_sync)->Iterations(20000)->Repetitions(3)->UseRealTime()->Unit(benchmark::kMicrosecond);

// (a) one round per iteration: four async calls on four managers sent together, then awaited.
void manager_round_async(benchmark::State& state) {
  std::vector<fiber::async_manager> managers(num_envs);
  std::vector<fiber::proxy<cartpole>> envs;
  for (int i = 0; i < num_envs; ++i) envs.push_back(managers[i].create<cartpole>(std::uint64_t(i)).get());
  for (auto& e : envs) (void)e.reset().get();
  for (auto _ : state) {
    std::vector<fiber::op<cartpole_step>> handles;
    for (auto& e : envs) handles.push_back(e.step(1));
    for (int i = 0; i < num_envs; ++i)
      if (std::move(handles[i]).get().done) (void)envs[i].reset().get();
  }
}
BENCHMARK(manager_round_async)->Iterations(5000)->Repetitions(3)->UseRealTime()->Unit(benchmark::kMicrosecond);

// (b) the harness: steps_time of 4 envs x 200 steps with a 1 ms step cost.
template <class Manager>
void harness(benchmark::State& state) {
  const int steps = 200, cost_us = 1000;
  const bool sync = std::is_same_v<Manager, fiber::manager>;
  const double cost_cal = measured_sleep_s(cost_us);
  std::vector<Manager> managers(num_envs);
  std::vector<fiber::proxy<cartpole>> envs;
  for (int i = 0; i < num_envs; ++i) envs.push_back(managers[i].template create<cartpole>(std::uint64_t(i), cost_us).get());
  for (auto& e : envs) (void)e.reset().get();
  std::mt19937 rng(1234);
  double steps_time = 0;
  for (auto _ : state) {
    auto t0 = clock_type::now();
    for (int s = 0; s < steps; ++s) {
      std::vector<fiber::op<cartpole_step>> handles;
      for (auto& e : envs) handles.push_back(e.step(static_cast<int>(rng() % 2)));
      for (int i = 0; i < num_envs; ++i)
        if (std::move(handles[i]).get().done) (void)envs[i].reset().get();
    }
    steps_time = std::chrono::duration<double>(clock_type::now() - t0).count();
    state.SetIterationTime(steps_time);
  }
  const int critical_calls = steps * (sync ? num_envs : 1);
  state.counters["steps_time_s"] = steps_time;
  state.counters["ideal_s"] = critical_calls * 1e-3;
  state.counters["ovh_cal_us_per_call"] = (steps_time - critical_calls * cost_cal) / critical_calls * 1e6;
}
BENCHMARK(harness<fiber::manager>)->Name("harness_sync")->Iterations(1)->Repetitions(3)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(harness<fiber::async_manager>)->Name("harness_async")->Iterations(1)->Repetitions(3)->UseManualTime()->Unit(benchmark::kMillisecond);
}  // namespace

// (c) A population-based-training round: 8 members, each `train` waiting 100 ms (on a device, say),
// called together through async managers; one manager holding all 8, or one manager each. A
// manager's server runs its objects' calls one at a time (docs/api.md, "manager"): the round
// takes 8 trains on one manager, 1 on eight.
struct pbt_member {
  explicit pbt_member(int id) : id_(id) {}
  int train(int ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return id_;
  }

 private:
  int id_;
};
FIBER_REMOTE_CLASS(pbt_member, train);
namespace {

void pbt_round(benchmark::State& state) {
  const int members = 8, managers_n = static_cast<int>(state.range(0)), train_ms = 100;
  std::vector<fiber::async_manager> managers(static_cast<std::size_t>(managers_n));
  std::vector<fiber::proxy<pbt_member>> population;
  for (int i = 0; i < members; ++i) population.push_back(managers[static_cast<std::size_t>(i % managers_n)].create<pbt_member>(i).get());
  for (auto _ : state) {
    std::vector<fiber::op<int>> rounds;
    for (auto& m : population) rounds.push_back(m.train(train_ms));
    for (auto& r : rounds) benchmark::DoNotOptimize(std::move(r).get());
  }
  state.counters["trains_per_round_time"] = benchmark::Counter(members * train_ms * 1e-3);
}
BENCHMARK(pbt_round)->Arg(1)->Arg(8)->ArgName("managers")->Iterations(5)->Repetitions(3)->UseRealTime()->Unit(benchmark::kMillisecond);
}  // namespace
