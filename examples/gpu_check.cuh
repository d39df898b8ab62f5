// CUDA failures as exceptions in CUDA's words, naming the devices the process was given.
#pragma once
#include <cuda_runtime.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace gpu {

inline void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  throw std::runtime_error(std::string("CUDA ") + what + ": " + cudaGetErrorString(e) +
                           " (CUDA_VISIBLE_DEVICES=" + (visible ? visible : "unset") + ")");
}

}  // namespace gpu
