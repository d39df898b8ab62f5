// The seeds' GPU example: a child that owns one GPU (FIBER_META .gpu = 1) receives two matrices
// over a simple_queue, multiplies them on its device (gpu_matmul.cu) and sends the product back;
// the master checks the product against its own, computed on the CPU.
//
//   gpu_matmul [n] [rounds]     n x n matrices (default 512), rounds of products (default 5)
//
// fiber places the child where a GPU is free and gives it that device alone: CUDA_VISIBLE_DEVICES
// on the local backend, a device request on docker, nvidia.com/gpu on kubernetes, a gres on slurm.
// The master needs no GPU. Where no node has one, the child cannot be placed: the example says so
// and exits 0.
#include <fiber/fiber.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gpu_kernels.hpp"

using matrix = std::vector<float>;  // n x n, row-major

namespace {

matrix multiply_on_cpu(const matrix& a, const matrix& b, int n) {
  matrix c(a.size(), 0.0f);
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < n; ++k) {
      float x = a[i * n + k];
      for (int j = 0; j < n; ++j) c[i * n + j] += x * b[k * n + j];
    }
  return c;
}

matrix random_matrix(int n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  matrix m(static_cast<std::size_t>(n) * n);
  for (auto& x : m) x = u(gen);
  return m;
}

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

// Runs in the child, on the device fiber gave it: products until an empty matrix says stop. A CUDA
// failure ends the child with CUDA's words, which the master reports.
void gpu_multiplier(int n, fiber::simple_queue<matrix> in, fiber::simple_queue<matrix> out) {
  gpu::matmul device(n);
  for (;;) {
    matrix a = in.get().get();
    if (a.empty()) return;
    matrix b = in.get().get();
    out.put(device.multiply(a, b)).get();
  }
}
FIBER_REMOTE(gpu_multiplier);
FIBER_META(gpu_multiplier, .gpu = 1);

int main(int argc, char** argv) {
  fiber::init(argc, argv);
  int n = argc > 1 ? std::atoi(argv[1]) : 512;
  int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  if (n <= 0 || rounds <= 0) {
    std::fprintf(stderr, "usage: gpu_matmul [n > 0] [rounds > 0]\n");
    return 2;
  }
  fiber::simple_queue<matrix> in, out;
  fiber::process child(&gpu_multiplier, n, in, out);
  try {
    child.start().get();
  } catch (const fiber::error& e) {
    if (e.code() != fiber::errc::unsatisfiable) throw;
    std::printf("gpu_matmul needs a GPU and none can be had here, so there is nothing to run: %s\n", e.reason().c_str());
    return 0;
  }

  auto a = random_matrix(n, 1), b = random_matrix(n, 2);
  auto t = std::chrono::steady_clock::now();
  auto expected = multiply_on_cpu(a, b, n);
  double cpu_ms = ms_since(t);

  double child_ms = 0;
  for (int r = 0; r < rounds; ++r) {
    t = std::chrono::steady_clock::now();
    in.put(a).get();
    in.put(b).get();
    std::optional<matrix> c;
    // The product, or the child's end: a child that failed sends nothing.
    while (!(c = out.get(std::chrono::milliseconds(200)).get()))
      if (!child.is_alive()) break;
    if (!c) {
      child.join().get();
      auto why = child.exception();
      std::fprintf(stderr, "the GPU child failed: %s\n",
                   why ? why->what() : ("it exited with code " + std::to_string(child.exitcode().value_or(-1))).c_str());
      return 1;
    }
    if (r > 0 || rounds == 1) child_ms += ms_since(t);  // the first round also loads CUDA
    double worst = 0, scale = 0;
    for (std::size_t i = 0; i < expected.size(); ++i) {
      worst = std::max(worst, static_cast<double>(std::fabs((*c)[i] - expected[i])));
      scale = std::max(scale, static_cast<double>(std::fabs(expected[i])));
    }
    if (worst > 1e-4 * scale * std::sqrt(static_cast<double>(n))) {
      std::fprintf(stderr, "the GPU's product differs from the CPU's by %g (of %g)\n", worst, scale);
      return 1;
    }
  }
  in.put(matrix{}).get();
  child.join().get();
  int timed = rounds > 1 ? rounds - 1 : 1;
  std::printf("the GPU's product matches the CPU's (%d x %d, %d rounds)\n", n, n, rounds);
  std::printf("through the child (send both, multiply, receive): %.2f ms a round\n", child_ms / timed);
  std::printf("on the CPU in this process: %.2f ms\n", cpu_ms);
  // Beside it, the same product on a GPU of this process, where the master can see one (the local
  // backend on a GPU host): what going through a child costs.
  if (gpu::usable_devices() > 0) {
    gpu::matmul device(n);
    (void)device.multiply(a, b);  // loads CUDA
    t = std::chrono::steady_clock::now();
    for (int r = 0; r < timed; ++r) (void)device.multiply(a, b);
    std::printf("on a GPU in this process (copy both, multiply, copy back): %.2f ms a round\n", ms_since(t) / timed);
  }
  return child.exitcode() == 0 ? 0 : 1;
}
