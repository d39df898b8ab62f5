// The classic cart-pole (Barto, Sutton & Anderson 1983), as gym's CartPole-v1 integrates it:
// Euler steps of tau = 0.02 s, the same constants and termination thresholds. Shared by
// examples/async_manager and bench/manager_bench.
#pragma once
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <random>
#include <thread>

#include <fiber/remote_class.hpp>

struct cartpole_step {
  std::array<double, 4> state{};  // x, x_dot, theta, theta_dot
  double reward = 0;
  bool done = false;
};

class cartpole {
 public:
  /// `step_cost_us`: extra time each step() waits (an environment that waits on something).
  explicit cartpole(std::uint64_t seed, int step_cost_us = 0) : rng_(seed), step_cost_us_(step_cost_us) {}

  std::array<double, 4> reset() {
    std::uniform_real_distribution<double> u(-0.05, 0.05);
    for (auto& s : state_) s = u(rng_);
    return state_;
  }

  cartpole_step step(int action) {
    constexpr double gravity = 9.8, masscart = 1.0, masspole = 0.1, total_mass = masscart + masspole;
    constexpr double length = 0.5, polemass_length = masspole * length, force_mag = 10.0, tau = 0.02;
    constexpr double theta_threshold = 12 * 2 * M_PI / 360, x_threshold = 2.4;
    auto [x, x_dot, theta, theta_dot] = state_;
    double force = action == 1 ? force_mag : -force_mag;
    double cos_t = std::cos(theta), sin_t = std::sin(theta);
    double temp = (force + polemass_length * theta_dot * theta_dot * sin_t) / total_mass;
    double theta_acc = (gravity * sin_t - cos_t * temp) / (length * (4.0 / 3.0 - masspole * cos_t * cos_t / total_mass));
    double x_acc = temp - polemass_length * theta_acc * cos_t / total_mass;
    x += tau * x_dot;
    x_dot += tau * x_acc;
    theta += tau * theta_dot;
    theta_dot += tau * theta_acc;
    state_ = {x, x_dot, theta, theta_dot};
    bool done = x < -x_threshold || x > x_threshold || theta < -theta_threshold || theta > theta_threshold;
    if (step_cost_us_ > 0) std::this_thread::sleep_for(std::chrono::microseconds(step_cost_us_));
    return {state_, 1.0, done};
  }

 private:
  std::mt19937_64 rng_;
  int step_cost_us_;
  std::array<double, 4> state_{};
};

FIBER_REMOTE_CLASS(cartpole, reset, step);
