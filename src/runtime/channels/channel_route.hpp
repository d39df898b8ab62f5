// Where this process's queue and pipe operations go: into the broker here (the master), or up to
// the master (a worker). Answers come back through pending_gets.
#pragma once
#include <cstdint>
#include "transport/zmq_channel.hpp"

namespace fiber::detail {

class channel_route {
 public:
  virtual ~channel_route() = default;
  virtual void put(std::uint64_t channel, multipart&& payload) = 0;
  virtual void get(std::uint64_t channel, std::uint64_t request) = 0;
  /// Withdraws a read that timed out; it completes with errc::timeout, or with its message if
  /// that was already on its way.
  virtual void cancel_get(std::uint64_t channel, std::uint64_t request) = 0;
  virtual void release(std::uint64_t channel) noexcept = 0;
  /// The process whose channel ids carry `prefix` has ended, and the queues and pipes it made
  /// with it: their reads fail with errc::maker_gone from now on.
  virtual void maker_gone(std::uint32_t prefix) = 0;
  /// Closes this side's sockets and ends what it started; idempotent.
  virtual void shutdown() noexcept = 0;
};

}  // namespace fiber::detail
