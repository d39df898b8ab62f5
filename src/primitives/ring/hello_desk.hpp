// Where a ring member takes the links its lower ranks make to it: it accepts on its listeners and
// advances each connection's hello without ever blocking on one, so a peer that sends nothing,
// or a byte a minute, holds no member up. A hello proves the ring's secret: across hosts by a TLS
// 1.3 handshake with the ring's key (the secret never crosses the wire) and then the dialer's
// rank, encrypted; on this host (a unix socket the kernel keeps between the two processes, from
// this user only) by the secret itself, the rank, and the shared memory segment and doorbells.
// A hello not done within hello_limit of its accept is dropped; at most most_waiting wait.
#pragma once
#include <poll.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "transport/shared_channel.hpp"
#include "primitives/ring/sealed_link.hpp"

namespace fiber::detail {

/// A link a member made to this one, its hello done.
struct admitted_link {
  int rank = -1;
  int fd = -1;
  std::unique_ptr<shared_channel> shared;  // on this host
  std::unique_ptr<sealed_link> tls;           // across hosts
};

class hello_desk {
 public:
  static constexpr auto hello_limit = std::chrono::seconds(10);
  static constexpr std::size_t most_waiting = 64;

  /// The listeners stay the caller's.
  hello_desk(int unix_listener, int tcp_listener, std::string secret, int my_rank);
  ~hello_desk();
  hello_desk(const hello_desk&) = delete;
  hello_desk& operator=(const hello_desk&) = delete;

  /// Appends what it waits on: the listeners and every hello in progress.
  void want(std::vector<pollfd>& pf) const;
  /// Accepts what waits, advances every hello with what has arrived, then drops those past their
  /// limit. Returns the links whose hello is done and whose rank `wanted` accepts (a lower rank
  /// not yet linked); the others are closed.
  std::vector<admitted_link> step(const std::function<bool(int)>& wanted);
  /// Hellos in progress (for tests).
  std::size_t waiting() const noexcept { return hellos_.size(); }

 private:
  struct hello;
  /// Advances one hello: true when it is done (admitted or refused: `out` says), false while it
  /// waits for more.
  bool advance(hello& h, std::vector<admitted_link>& out, const std::function<bool(int)>& wanted);
  int unix_listener_, tcp_listener_;
  std::string secret_;
  tls_session::key key_;
  int my_rank_;
  std::vector<std::unique_ptr<hello>> hellos_;
};

}  // namespace fiber::detail
