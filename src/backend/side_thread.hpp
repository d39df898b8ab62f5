// Work a backend hands to a thread of its own (creating containers, creating pods), so that the
// caller's loop never waits for an engine: the io_context that thread runs, and the one-shot
// answers that the loop, and a caller killing a child before it exists, may both wait for.
#pragma once
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>

namespace fiber::detail {

/// An io_context run by a thread of its own until finish().
class side_thread {
 public:
  side_thread() : work_(io_.get_executor()), thread_([this] { io_.run(); }) {}
  ~side_thread() { finish(); }
  side_thread(const side_thread&) = delete;
  side_thread& operator=(const side_thread&) = delete;

  asio::io_context& io() noexcept { return io_; }

  /// Lets what is in flight or queued end, then joins. An owner calls it first in its destructor,
  /// before the objects that work uses are destroyed.
  void finish() {
    if (!thread_.joinable()) return;
    asio::post(io_, [this] { work_.reset(); });
    thread_.join();
  }

 private:
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::thread thread_;
};

/// A value set once on one thread and read on others, by waiting for it.
template <class T>
class one_answer {
 public:
  void set(T value) {
    {
      std::lock_guard lock(m_);
      value_ = std::move(value);
      done_ = true;
    }
    cv_.notify_all();
  }
  /// The value, once set.
  const T& wait() {
    std::unique_lock lock(m_);
    cv_.wait(lock, [&] { return done_; });
    return value_;
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool done_ = false;
  T value_{};
};

}  // namespace fiber::detail
