// A child across a network on a direct link (TLS over TCP) has no I/O thread: while its main
// thread runs a task nobody reads or writes its link. The master must still hear from it, or it
// takes the child for stopped (its link is closed after heartbeat_timeout_ms of silence), and the
// child must still learn that its master is gone. This thread does both, once an interval: it
// sends a pulse when the child has sent nothing for an interval, and it ends the child when the
// master's side has hung up and the child has not noticed for two intervals (it was busy).
// An idle child costs one wake-up an interval, as ZeroMQ's heartbeats did.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "fiber/detail/unique_function.hpp"
#include "transport/stream_link.hpp"

namespace fiber::detail {

class link_pulse {
 public:
  /// `master_lost` runs on the pulse's thread (it exits the process).
  link_pulse(std::shared_ptr<stream_link> link, std::chrono::milliseconds interval, std::chrono::milliseconds silence,
             unique_function<void()> master_lost);
  ~link_pulse();
  /// The master's timing, once its config has come (before, the defaults); from any thread.
  void retune(std::chrono::milliseconds interval, std::chrono::milliseconds silence) noexcept;

 private:
  void run();

  std::shared_ptr<stream_link> link_;
  std::atomic<std::int64_t> interval_ms_, silence_ms_;
  std::mutex mutex_;
  std::condition_variable wake_;  // a retune or the end starts the next interval at once
  bool stopping_ = false;         // under mutex_
  unique_function<void()> master_lost_;
  // A plain thread and a flag rather than std::jthread: libc++ 16 has no <stop_token>.
  std::thread thread_;  // last: it starts once everything above exists
};

}  // namespace fiber::detail
