// Resident-memory limits for the local backend's children, where no cgroup enforces one: the
// watch reads each watched process's resident memory every `poll` (its VmRSS, and the kernel's
// high-water mark for the peak), and the first time one is above its limit it tells the owner,
// who stops the process and reports why. A limit on resident memory, not on address space
// (RLIMIT_AS): mapping a large file or starting threads reserves address space a C++ program
// never touches.
//
// One timer on the io_context, armed only while some watched process has a limit: a host with no
// limits, or only idle children without one, is never woken by it.
#pragma once
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <map>

#include "core/process_memory.hpp"
#include "fiber/detail/unique_function.hpp"

namespace fiber::detail {

class memory_watch {
 public:
  /// Told once, on the loop, with the process's memory as last read (its peak: the kernel's).
  using over_fn = unique_function<void(const memory_use& seen)>;

  memory_watch(asio::io_context& io, std::chrono::milliseconds poll);
  ~memory_watch();
  memory_watch(const memory_watch&) = delete;
  memory_watch& operator=(const memory_watch&) = delete;

  /// Watches process `pid` of this host against `limit_mb` MiB of resident memory (0: none for
  /// now); `over` runs the first time it is above, after which the process is no longer watched.
  /// Returns the watch's number.
  std::uint64_t watch(int pid, std::uint64_t limit_mb, over_fn over);
  /// Changes a watch's limit (a pool's worker takes on the limit of the function it runs).
  void set_limit(std::uint64_t id, std::uint64_t limit_mb);
  /// Stops watching (the process ended, or its owner let it go); an unknown number is ignored.
  void unwatch(std::uint64_t id);

  /// Processes watched with a limit now.
  std::size_t limited() const noexcept;
  std::chrono::milliseconds poll_interval() const noexcept { return poll_; }

 private:
  struct entry {
    int pid;
    std::uint64_t limit_bytes;
    over_fn over;
  };
  void arm();
  void poll_all();

  asio::steady_timer timer_;
  std::chrono::milliseconds poll_;
  std::map<std::uint64_t, entry> entries_;
  std::uint64_t next_id_ = 1;
  bool armed_ = false;
};

}  // namespace fiber::detail
