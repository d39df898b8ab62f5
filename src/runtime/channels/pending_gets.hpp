// The reads of queues and pipes this process waits for, by request id: completed by the broker
// (master) or by the master's answer (worker), failed at shutdown, withdrawn after a timeout.
#pragma once
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <system_error>
#include <unordered_map>

#include "fiber/detail/unique_function.hpp"
#include "transport/zmq_channel.hpp"

namespace fiber::detail {

class pending_gets {
 public:
  /// `may_run_inline`: false when called inside the initiating call (the handler must post).
  using handler = unique_function<void(std::error_code, multipart, bool may_run_inline)>;

  /// Registers a read; returns its request id.
  std::uint64_t add(std::uint64_t channel, handler h);
  /// After `timeout`, `withdraw(channel, request)` runs once unless the read completed first; the
  /// withdrawal completes it later (with errc::timeout, or with the message already on its way).
  void expire_after(std::uint64_t request, asio::io_context& io, std::chrono::milliseconds timeout,
                    unique_function<void(std::uint64_t channel, std::uint64_t request)> withdraw);
  bool contains(std::uint64_t request) const { return gets_.count(request) != 0; }
  void complete(std::uint64_t request, std::error_code ec, multipart&& payload, bool may_run_inline);
  /// Fails every read with `ec` (shutdown).
  void fail_all(std::error_code ec);

 private:
  struct entry {
    std::uint64_t channel = 0;
    handler h;
    std::unique_ptr<asio::steady_timer> timer;
  };
  std::unordered_map<std::uint64_t, entry> gets_;
  std::uint64_t next_request_ = 1;
  std::shared_ptr<int> alive_ = std::make_shared<int>();  // timers' handlers outlive nothing
};

}  // namespace fiber::detail
