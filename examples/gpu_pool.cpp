// A pool of GPU workers, each on a device of its own: pool_options::needs = {.gpu = 1} starts
// every worker with one GPU (a function's FIBER_META .gpu would do the same for its tasks). Each
// task sums the squares of a seeded vector on its worker's device (gpu_pool.cu); the master checks
// every sum against its own and shows how the tasks spread over the devices.
//
//   gpu_pool [workers] [tasks]      default: 2 workers, 32 tasks
//
// With fewer GPUs than workers, the extra workers wait for a free device (local backend) or a
// node with one. Where no node has a GPU, the example says so and exits 0.
#include <fiber/fiber.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gpu_kernels.hpp"

namespace {

std::vector<double> seeded(int seed, int n) {
  std::mt19937_64 gen(static_cast<unsigned>(seed));
  std::normal_distribution<double> normal;
  std::vector<double> x(static_cast<std::size_t>(n));
  for (auto& v : x) v = normal(gen);
  return x;
}

}  // namespace

// The sum of squares of seed's vector, computed on this worker's device, and which device of the
// machine that is (its PCI bus id).
std::pair<double, std::string> sum_of_squares(int seed, int n) {
  return {gpu::sum_of_squares(seeded(seed, n)), gpu::device_bus_id()};
}
FIBER_REMOTE(sum_of_squares);

int main(int argc, char** argv) {
  fiber::init(argc, argv);
  int workers = argc > 1 ? std::atoi(argv[1]) : 2;
  int tasks = argc > 2 ? std::atoi(argv[2]) : 32;
  if (workers <= 0 || tasks <= 0) {
    std::fprintf(stderr, "usage: gpu_pool [workers > 0] [tasks > 0]\n");
    return 2;
  }
  const int n = 1 << 20;
  std::vector<std::tuple<int, int>> args;
  for (int seed = 0; seed < tasks; ++seed) args.emplace_back(seed, n);

  fiber::pool pool(fiber::pool_options{.processes = workers, .needs = {.gpu = 1}});
  std::vector<std::pair<double, std::string>> results;
  try {
    results = pool.starmap(&sum_of_squares, args, 1).get();
  } catch (const fiber::error& e) {
    if (e.code() == fiber::errc::unsatisfiable) {
      std::printf("gpu_pool needs a GPU and none can be had here, so there is nothing to run: %s\n", e.reason().c_str());
      return 0;
    }
    std::fprintf(stderr, "gpu_pool failed: %s\n", e.what());  // a CUDA failure in a worker, say
    return 1;
  }
  std::map<std::string, int> per_device;
  for (int seed = 0; seed < tasks; ++seed) {
    double expected = 0;
    for (double v : seeded(seed, n)) expected += v * v;
    auto& [sum, device] = results[static_cast<std::size_t>(seed)];
    if (std::fabs(sum - expected) > 1e-9 * expected) {
      std::fprintf(stderr, "task %d: the GPU's sum %.17g differs from the CPU's %.17g\n", seed, sum, expected);
      return 1;
    }
    ++per_device[device];
  }
  std::printf("%d sums of squares match the CPU's; tasks per device:", tasks);
  for (auto& [device, count] : per_device) std::printf(" %s %d", device.c_str(), count);
  std::printf("\n");
  pool.close();
  pool.join().get();
}
