// Who runs the io_context: a caller's own (embedding), or one fiber owns. With an owned loop a
// caller that blocks runs the loop itself while it waits (no thread hop between the caller and
// the loop), and a standby thread runs it while nobody does (a master's; a worker's main thread
// always drives its own). See docs/design.md, "Who runs the event loop".
#pragma once
#include <asio/any_io_executor.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "fiber/detail/unique_function.hpp"

namespace fiber::detail {
class spin_pollers;

class event_loop {
 public:
  /// The caller's io_context (it runs it), or, when `external` is null, one of fiber's, run by a
  /// standby thread while no caller drives it when `standby` is true. A caller that drives an
  /// owned loop polls it for up to `spin` before it sleeps in the kernel (config::wait_spin_us).
  explicit event_loop(asio::io_context* external, bool standby = true,
                      std::chrono::microseconds spin = std::chrono::microseconds(0));
  ~event_loop();
  event_loop(const event_loop&) = delete;
  event_loop& operator=(const event_loop&) = delete;

  asio::io_context& io() noexcept { return *io_; }
  asio::any_io_executor executor() noexcept { return io_->get_executor(); }
  bool in_loop_thread() const noexcept;
  /// True when fiber owns the io_context (a blocking caller may run it).
  bool owns_loop() const noexcept { return owned_io_ != nullptr; }

  /// Blocks until `done` is set with notify_done; with an owned loop, runs the loop meanwhile.
  void wait_until(const std::atomic<bool>& done) { drive(nullptr, done); }
  void notify_done(std::atomic<bool>& done) noexcept;
  /// Takes the loop (waiting for it if another thread has it), runs `start` on this thread,
  /// then runs the loop until `done`. Without an owned loop, `start` runs on the loop's thread.
  /// An exception from `start` is rethrown here.
  void drive(unique_function<void()> start, const std::atomic<bool>& done);
  /// Runs `f` on the loop and waits for it; rethrows what it throws.
  void run_sync(unique_function<void()> f);
  /// Runs `f` now when this thread can take the loop (run_sync), else posts it to the caller's
  /// io_context: never waits on a loop that nobody may be running.
  void run_or_post(unique_function<void()> f);

  /// Starts the standby thread of an owned loop made without one (a worker that became a master
  /// of its own children); nothing if it runs already or the loop is a caller's.
  void start_standby();
  /// Whether handlers may run on the standby thread while a caller's code runs outside the loop.
  bool has_standby() const noexcept { return standby_.joinable(); }
  /// Whether this thread may touch what the loop owns now: it runs a handler, or it holds the loop
  /// in drive() (running its `start`, before it runs the loop).
  bool this_thread_drives() const noexcept {
    return in_loop_thread() || driver_.load(std::memory_order_relaxed) == std::this_thread::get_id();
  }
  /// Runs `last` on the loop (or here, when the loop is gone; it must be idempotent), then ends
  /// the standby thread and lets an owned loop run out. Safe from any thread, the loop's included.
  void stop(unique_function<void()> last) noexcept;

  /// Whether the next wait that is not answered at once starts with a spin (run_until's count of
  /// spins that went unanswered); for tests.
  bool spins_next_wait() const noexcept {
    return spin_.count() > 0 && (spin_misses_ < spin_misses_allowed || (waits_without_spin_ + 1) % spin_probe_every == 0);
  }
  static constexpr int spin_misses_allowed = 4;
  static constexpr unsigned spin_probe_every = 32;
  /// A worker's spin comes with its master's config (on the loop's thread).
  void set_spin(std::chrono::microseconds spin) noexcept { spin_ = spin; }

 private:
  void standby_loop();
  /// io_->run_one() (or, when not `block`, poll_one()), logging an exception that escapes a
  /// handler: false when the loop stopped (or, polling, when no handler was ready).
  bool run_one_logged(bool block = true) noexcept;
  /// Runs the loop on this thread until `is_done`, polling it for up to spin_ first; false when
  /// the loop stopped.
  template <class Done>
  bool run_until(Done is_done);

  std::unique_ptr<asio::io_context> owned_io_;
  asio::io_context* io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::thread standby_;

  std::mutex wait_mutex_;
  std::condition_variable wait_cv_;     // callers blocked in wait_until
  std::condition_variable standby_cv_;  // the standby thread; signalled only at stop
  bool self_driven_ = false;   // owned loop: whoever blocks runs it
  bool driving_ = false;       // some thread is inside run_one
  std::atomic<std::thread::id> driver_{};  // the caller that holds the loop in drive(), if any
  bool standby_driving_ = false;
  bool kicked_ = false;        // a wake-up is on its way to the standby's run_one
  bool stopping_ = false;
  int want_to_drive_ = 0;      // callers waiting for the baton
  std::uint64_t releases_ = 0;  // callers that let go of the loop so far (the standby's linger)
  std::chrono::microseconds spin_;
  // Adaptive spinning (run_until), touched only by the thread that drives the loop.
  spin_pollers* pollers_ = nullptr;  // the io_context's, once a link through shared memory made it
  int spin_misses_ = 0;
  unsigned waits_without_spin_ = 0;
};

}  // namespace fiber::detail
