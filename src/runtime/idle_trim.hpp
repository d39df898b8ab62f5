// Gives back to the kernel the memory a burst of work freed, once the process has been idle a
// while. fiber keeps freed memory for reuse (core/malloc_tuning, up to malloc_keep_mb): handing it
// back after every large message costs a TLB flush and page faults, and a loop of maps runs faster
// for keeping it. But a service whose master ran a million tasks and then waits should not hold
// that peak: once no pool has a call under way for idle_trim_ms, a timer on fiber's loop trims
// (glibc's malloc_trim), unless work comes back first. Not on a caller's io_context: a timer of
// fiber's there would keep its run() from returning once the caller's own work is done.
#pragma once
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

namespace fiber::detail {

/// Hands freed heap memory back to the kernel (malloc_trim(0) where glibc has it).
void give_back_freed_memory() noexcept;

class idle_trim {
 public:
  /// `delay` 0: never trims. `trim`: what trimming does (the test counts it).
  idle_trim(asio::io_context& io, std::chrono::milliseconds delay, std::function<void()> trim = give_back_freed_memory);

  /// The one of `io`, behind it as an Asio service: made by the first pool that asks, with its
  /// delay, and gone with the io_context. Pools on a caller's io_context ask with 0.
  static idle_trim& of(asio::io_context& io, std::chrono::milliseconds delay);

  /// Busy until dropped (from any thread): a pool holds one while a call of it is under way.
  class hold {
   public:
    hold() = default;
    hold(hold&& o) noexcept : s_(std::move(o.s_)) {}
    hold& operator=(hold&& o) noexcept {
      if (this != &o) {
        release();
        s_ = std::move(o.s_);
      }
      return *this;
    }
    ~hold() { release(); }
    explicit operator bool() const noexcept { return !s_.expired(); }

   private:
    friend class idle_trim;
    struct state;
    explicit hold(std::weak_ptr<state> s) : s_(std::move(s)) {}
    void release() noexcept;
    std::weak_ptr<state> s_;  // the trimmer may go first (its runtime's end): then nothing to do
  };
  hold busy();
  /// Trims no more, and lets go of its timer: the runtime is shutting down, and an owned loop
  /// must be able to run out of work. From any thread.
  void stop() noexcept;
  /// How many times it trimmed.
  std::uint64_t trims() const noexcept;

 private:
  std::shared_ptr<hold::state> s_;  // the only owner: handlers and holds keep weak ones
};

}  // namespace fiber::detail
