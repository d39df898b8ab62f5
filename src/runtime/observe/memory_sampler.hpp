// When a process's memory is sampled for the run's recording: every record_memory_ms while the
// process works, and not at all while it sleeps. A worker with nothing to do would otherwise wake
// once an interval only to read /proc/self/status and find what it found last time: a thousand
// idle workers took a tenth of a core that way. So a worker's sampler goes dormant at the first
// tick with no work since the last, and the next piece of work (a message to or from its master)
// arms it again; what the worker held at its end is recorded then anyway (run_observer). The top
// master's sampler never sleeps: the program's own allocations there are work fiber cannot see.
// On the loop's thread.
#pragma once
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <optional>

namespace fiber::detail {

class memory_sampler {
 public:
  /// `sample` records the memory; `sleeps`: dormant while no work comes (a worker's).
  memory_sampler(asio::io_context& io, std::chrono::milliseconds every, bool sleeps, std::function<void()> sample)
      : io_(io), every_(every), sleeps_(sleeps), sample_(std::move(sample)) {}
  memory_sampler(const memory_sampler&) = delete;
  memory_sampler& operator=(const memory_sampler&) = delete;

  /// Starts the ticks.
  void start();
  /// Something was done: a dormant sampler wakes, and the next tick samples.
  void worked() {
    worked_ = true;
    if (dormant_) {
      dormant_ = false;
      arm();
    }
  }
  /// No more ticks.
  void stop() noexcept;
  bool dormant() const noexcept { return dormant_; }

 private:
  void arm();

  asio::io_context& io_;
  std::chrono::milliseconds every_;
  bool sleeps_;
  std::function<void()> sample_;
  std::optional<asio::steady_timer> timer_;
  bool worked_ = true;  // the first tick samples
  bool dormant_ = false, stopped_ = false;
};

}  // namespace fiber::detail
