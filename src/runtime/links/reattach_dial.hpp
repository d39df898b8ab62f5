// The master's side of a reattach (runtime/links/reattach_point is the worker's): a master that
// takes a durable run up dials each worker its journal names, proves the worker's secret, checks
// the worker's own proof, reads what the worker holds, and then sends it where to link again (or
// tells it to leave). Blocking, with a bound on each wait: a worker's point answers from a thread
// of its own, at once. The wire is runtime/links/reattach_wire.hpp.
#pragma once
#include <chrono>
#include <cstddef>
#include <string>

#include "runtime/links/reattach_wire.hpp"

namespace fiber::detail {

class reattach_dial {
 public:
  /// Dials point `name` (an abstract unix socket's name, or "tcp:IPV4:PORT") and proves `secret`. Throws std::system_error when nothing listens there
  /// (the worker is gone) or the worker stops answering within `patience`, and
  /// fiber::error(protocol_error) when the peer is not of this user, does not prove the secret,
  /// or says it holds more than `state_limit` bytes.
  reattach_dial(const std::string& name, const std::string& secret, std::chrono::milliseconds patience,
                std::size_t state_limit);
  ~reattach_dial();
  reattach_dial(const reattach_dial&) = delete;
  reattach_dial& operator=(const reattach_dial&) = delete;

  /// What the worker said it holds, and its pid (as the kernel says, not the worker).
  const std::string& state() const noexcept { return state_; }
  int peer_pid() const noexcept { return peer_pid_; }
  /// Where to link again (at most reattach_record_limit bytes; empty: the worker leaves). Throws
  /// std::system_error when the worker is gone.
  void send(const std::string& record) const;

 private:
  int fd_ = -1;
  int peer_pid_ = 0;  // 0 over TCP: the kernel does not say
  std::string state_;
  reattach_proof key_{};  // what seals this session's messages
};

}  // namespace fiber::detail
