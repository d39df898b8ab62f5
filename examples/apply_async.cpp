// Submits independent jobs with apply_async and collects them in any order; one of them throws.
#include <fiber/fiber.hpp>

#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <vector>

// Integrates sin(x) over [a, b] with n midpoint steps.
double integrate_sin(double a, double b, int n) {
  if (n <= 0) throw std::invalid_argument("n must be positive, got " + std::to_string(n));
  double h = (b - a) / n, sum = 0;
  for (int i = 0; i < n; ++i) sum += std::sin(a + (i + 0.5) * h);
  return sum * h;
}
FIBER_REMOTE(integrate_sin);

int main(int argc, char** argv) {
  fiber::init(argc, argv);
  fiber::pool pool(2);
  const double pi = std::acos(-1.0);
  std::vector<fiber::op<double>> jobs;
  for (int k = 1; k <= 4; ++k) jobs.push_back(pool.apply_async(&integrate_sin, 0.0, k * pi / 4, 1'000'000));
  auto bad = pool.apply_async(&integrate_sin, 0.0, 1.0, 0);

  for (int k = 4; k >= 1; --k)  // in any order
    std::printf("integral of sin over [0, %d pi/4] = %.6f\n", k, std::move(jobs[k - 1]).get());
  try {
    std::move(bad).get();
  } catch (const fiber::remote_error& e) {
    std::printf("the bad job failed in %s: %s: %s\n", e.where().c_str(), e.type().c_str(), e.message().c_str());
  }
  auto s = pool.stats();
  std::printf("done %zu, workers lost %zu\n", s.done, s.workers_lost);
}
