// How much memory this process holds now, and has held at most: what the flight recorder samples
// (record_memory_ms) so that a run's trace shows each process's memory over time.
#pragma once
#include <cstdint>

namespace fiber::detail {

struct memory_use {
  std::uint64_t resident = 0;  // bytes in RAM now (VmRSS)
  std::uint64_t peak = 0;      // the most it held at once (VmHWM)
};

/// Read from /proc/self/status; zeros where the kernel does not say.
memory_use this_process_memory();
/// The same for process `pid` of this host's process namespace (a local child, read by its
/// master before it ends it); zeros where it cannot be read.
memory_use process_memory(int pid);

}  // namespace fiber::detail
