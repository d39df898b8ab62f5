// Four CartPole environments, each in its own manager's server process, stepped in lock-step:
// first through sync managers (each step() completes before the next is sent), then through
// async managers (the four step() calls of a round are sent together, then awaited).
//
//   ./async_manager [steps=200] [step_cost_ms=1]
#include <fiber/fiber.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "cartpole.hpp"

namespace {
constexpr int num_envs = 4;

template <class Manager>
double run(int steps, int step_cost_us) {
  std::vector<Manager> managers(num_envs);
  std::vector<fiber::proxy<cartpole>> envs;
  for (int i = 0; i < num_envs; ++i) envs.push_back(managers[i].template create<cartpole>(std::uint64_t(i), step_cost_us).get());
  for (auto& e : envs) (void)e.reset().get();
  std::mt19937 rng(1234);
  auto t0 = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s) {
    std::vector<fiber::op<cartpole_step>> handles;
    for (auto& e : envs) handles.push_back(e.step(static_cast<int>(rng() % 2)));  // async: all four on their way
    for (int i = 0; i < num_envs; ++i)
      if (std::move(handles[i]).get().done) (void)envs[i].reset().get();
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

int main(int argc, char** argv) {
  fiber::init(argc, argv);
  int steps = argc > 1 ? std::atoi(argv[1]) : 200;
  int cost_us = static_cast<int>((argc > 2 ? std::atof(argv[2]) : 1.0) * 1000);
  std::printf("Sync manager took %.2fs\n", run<fiber::manager>(steps, cost_us));
  std::printf("Async manager took %.2fs\n", run<fiber::async_manager>(steps, cost_us));
}
