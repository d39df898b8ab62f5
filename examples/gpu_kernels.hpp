// The CUDA side of the GPU examples behind plain C++: nvcc compiles the .cu files, and the
// programs that use fiber (whose headers hold asio's coroutines, which nvcc's front end does not
// parse) are compiled by the host compiler. Failures throw std::runtime_error in CUDA's words.
#pragma once
#include <string>
#include <vector>

namespace gpu {

/// Devices CUDA can use in this process (0 when it cannot: no driver, no device, none visible).
int usable_devices() noexcept;

/// n x n products (row-major floats) on device 0 of those this process sees, with the device's
/// buffers allocated once.
class matmul {
 public:
  explicit matmul(int n);
  ~matmul();
  matmul(const matmul&) = delete;
  matmul& operator=(const matmul&) = delete;
  /// Copies both in, multiplies, copies the product back.
  std::vector<float> multiply(const std::vector<float>& a, const std::vector<float>& b);

 private:
  int n_;
  float *a_ = nullptr, *b_ = nullptr, *c_ = nullptr;
};

/// The sum of x[i]^2 on device 0 of those this process sees.
double sum_of_squares(const std::vector<double>& x);

/// The PCI bus id of device 0 of those this process sees: which device of the machine it is.
std::string device_bus_id();

}  // namespace gpu
