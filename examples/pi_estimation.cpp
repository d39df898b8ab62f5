// Estimates pi by sampling points in the unit square, spread over a pool of worker processes.
#include <fiber/fiber.hpp>

#include <cstdint>
#include <cstdio>
#include <vector>

// splitmix64: a well-mixed 64-bit value from a seed, cheap enough for one point per task.
std::uint64_t mix(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Is the random point of this seed inside the quarter circle?
int inside(std::uint64_t seed) {
  double x = double(mix(2 * seed) >> 11) * 0x1.0p-53, y = double(mix(2 * seed + 1) >> 11) * 0x1.0p-53;
  return x * x + y * y < 1.0;
}
FIBER_REMOTE(inside);

int main(int argc, char** argv) {
  fiber::init(argc, argv);
  const std::size_t samples = 1'000'000;
  std::vector<std::uint64_t> seeds(samples);
  for (std::size_t i = 0; i < samples; ++i) seeds[i] = i;

  fiber::pool pool(4);
  auto hits = pool.map(&inside, seeds).get();  // or, in a coroutine: co_await pool.map(&inside, seeds)
  std::size_t count = 0;
  for (int h : hits) count += h;
  std::printf("Pi is roughly %.6f\n", 4.0 * double(count) / double(samples));
}
