// Estimates pi by sampling points in the unit square, spread over worker processes.
#include <fiber/fiber.hpp>

#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

// Counts how many of `samples` random points fall inside the quarter circle.
std::int64_t count_inside(std::int64_t samples, std::uint64_t seed, fiber::simple_queue<std::int64_t> results) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::int64_t inside = 0;
  for (std::int64_t i = 0; i < samples; ++i) {
    double x = u(rng), y = u(rng);
    inside += x * x + y * y < 1.0;
  }
  results.put(inside).get();
  return inside;
}
FIBER_REMOTE(count_inside);

int main(int argc, char** argv) {
  fiber::init(argc, argv);
  const int workers = 4;
  const std::int64_t total = 1'000'000, per_worker = total / workers;
  fiber::simple_queue<std::int64_t> results;
  std::vector<fiber::process> procs;
  for (int w = 0; w < workers; ++w) procs.emplace_back(&count_inside, per_worker, std::uint64_t(1234 + w), results);
  for (auto& p : procs) p.start().get();
  std::int64_t inside = 0;
  for (int w = 0; w < workers; ++w) inside += results.get().get();
  for (auto& p : procs) p.join().get();
  std::printf("Pi is roughly %.6f\n", 4.0 * double(inside) / double(per_worker * workers));
}
