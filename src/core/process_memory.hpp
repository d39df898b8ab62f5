// How much memory this process holds now, and has held at most: what the flight recorder samples
// (record_memory_ms) so that a run's trace shows each process's memory over time.
#pragma once
#include <cstdint>

namespace fiber::detail {

struct memory_use {
  std::uint64_t resident = 0;  // bytes in RAM now (VmRSS)
  std::uint64_t peak = 0;      // the most it held at once (VmHWM)
};

/// Read from /proc/self/statm and getrusage; zeros where the kernel does not say.
memory_use this_process_memory();
/// The same for process `pid` of this host's process namespace (a local child, read by its
/// master before it ends it); zeros where it cannot be read.
memory_use process_memory(int pid);

/// This host's memory (/proc/meminfo): all of it, and what can be had without swapping.
struct host_memory {
  std::uint64_t total = 0;      // bytes (MemTotal)
  std::uint64_t available = 0;  // bytes (MemAvailable)
};
/// Zeros where the kernel does not say.
host_memory this_host_memory();

}  // namespace fiber::detail
