// The device side of gpu_pool (gpu_kernels.hpp): a sum of squares, and which device this is.
#include <cuda_runtime.h>

#include <string>

#include "gpu_check.cuh"
#include "gpu_kernels.hpp"

namespace gpu {

namespace {

constexpr int threads = 256;

// Each block adds its part in shared memory, then one atomic add per block.
__global__ void sum_of_squares_kernel(const double* x, int n, double* out) {
  __shared__ double part[threads];
  double s = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += x[i] * x[i];
  part[threadIdx.x] = s;
  __syncthreads();
  for (int step = blockDim.x / 2; step > 0; step /= 2) {
    if (threadIdx.x < step) part[threadIdx.x] += part[threadIdx.x + step];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, part[0]);
}

}  // namespace

double sum_of_squares(const std::vector<double>& x) {
  check(cudaSetDevice(0), "cudaSetDevice");
  double *dx = nullptr, *dsum = nullptr;
  check(cudaMalloc(&dx, x.size() * sizeof(double) + sizeof(double)), "cudaMalloc");
  cudaError_t e = cudaMalloc(&dsum, sizeof(double));
  double sum = 0;
  if (e == cudaSuccess) e = cudaMemcpy(dx, x.data(), x.size() * sizeof(double), cudaMemcpyHostToDevice);
  if (e == cudaSuccess) e = cudaMemset(dsum, 0, sizeof(double));
  if (e == cudaSuccess) {
    sum_of_squares_kernel<<<64, threads>>>(dx, static_cast<int>(x.size()), dsum);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) e = cudaMemcpy(&sum, dsum, sizeof(double), cudaMemcpyDeviceToHost);
  cudaFree(dx);
  cudaFree(dsum);
  check(e, "sum of squares");
  return sum;
}

std::string device_bus_id() {
  check(cudaSetDevice(0), "cudaSetDevice");
  char bus[32] = {};
  check(cudaDeviceGetPCIBusId(bus, sizeof bus, 0), "cudaDeviceGetPCIBusId");
  return bus;
}

}  // namespace gpu
