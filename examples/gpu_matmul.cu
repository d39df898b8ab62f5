// The device side of gpu_matmul (gpu_kernels.hpp): a tiled matrix product.
#include <cuda_runtime.h>

#include <stdexcept>

#include "gpu_check.cuh"
#include "gpu_kernels.hpp"

namespace gpu {
namespace {

constexpr int tile = 16;

// One tile of the product per block, the tiles of a and b staged in shared memory.
__global__ void multiply_kernel(const float* a, const float* b, float* c, int n) {
  __shared__ float ta[tile][tile], tb[tile][tile];
  int row = blockIdx.y * tile + threadIdx.y, col = blockIdx.x * tile + threadIdx.x;
  float sum = 0;
  for (int t = 0; t < n; t += tile) {
    ta[threadIdx.y][threadIdx.x] = row < n && t + threadIdx.x < n ? a[row * n + t + threadIdx.x] : 0.0f;
    tb[threadIdx.y][threadIdx.x] = col < n && t + threadIdx.y < n ? b[(t + threadIdx.y) * n + col] : 0.0f;
    __syncthreads();
    for (int k = 0; k < tile; ++k) sum += ta[threadIdx.y][k] * tb[k][threadIdx.x];
    __syncthreads();
  }
  if (row < n && col < n) c[row * n + col] = sum;
}

}  // namespace

int usable_devices() noexcept {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

matmul::matmul(int n) : n_(n) {
  check(cudaSetDevice(0), "cudaSetDevice");
  auto bytes = static_cast<std::size_t>(n) * n * sizeof(float);
  try {
    check(cudaMalloc(&a_, bytes), "cudaMalloc");
    check(cudaMalloc(&b_, bytes), "cudaMalloc");
    check(cudaMalloc(&c_, bytes), "cudaMalloc");
  } catch (...) {
    cudaFree(a_);
    cudaFree(b_);
    throw;
  }
}

matmul::~matmul() {
  cudaFree(a_);
  cudaFree(b_);
  cudaFree(c_);
}

std::vector<float> matmul::multiply(const std::vector<float>& a, const std::vector<float>& b) {
  auto count = static_cast<std::size_t>(n_) * n_;
  if (a.size() != count || b.size() != count) throw std::invalid_argument("matmul: matrices of another size");
  std::vector<float> c(count);
  check(cudaMemcpy(a_, a.data(), count * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemcpy(b_, b.data(), count * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  dim3 threads(tile, tile), blocks((n_ + tile - 1) / tile, (n_ + tile - 1) / tile);
  multiply_kernel<<<blocks, threads>>>(a_, b_, c_, n_);
  check(cudaGetLastError(), "kernel launch");
  check(cudaMemcpy(c.data(), c_, count * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
  return c;
}

}  // namespace gpu
