// The dials a worker's reattach point has taken and not yet seen proven: each greeted at once (the
// greeting and a fresh challenge), then read without blocking until its 64 bytes (the caller's
// challenge and its proof of the secret) are in. A caller that says nothing, or too little, holds
// nobody else up: the master taking the run up is served as soon as its proof arrives, whatever
// else dialled first. The callers are bounded (the oldest goes for a new one past the bound) and
// each is given a patience; a wrong proof ends its caller before a byte more is read. No thread
// and no clock of its own: the point's thread polls the callers' sockets and says what time it is.
#pragma once
#include <poll.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/links/reattach_wire.hpp"

namespace fiber::detail {

class reattach_callers {
 public:
  using clock = std::chrono::steady_clock;
  /// A caller that proved the secret: its socket (the caller's to close now) and both challenges.
  struct proven {
    int fd = -1;
    reattach_challenge mine{}, theirs{};
  };

  reattach_callers(std::string secret, std::size_t limit, std::chrono::milliseconds patience)
      : secret_(std::move(secret)), limit_(limit), patience_(patience) {}
  ~reattach_callers();  // closes every caller left
  reattach_callers(const reattach_callers&) = delete;
  reattach_callers& operator=(const reattach_callers&) = delete;

  /// Takes connection `fd` (non-blocking) and greets it; past the bound, the oldest caller goes.
  void add(int fd, clock::time_point now);
  /// Appends a pollfd (POLLIN) per caller to `fds`.
  void watch(std::vector<pollfd>& fds) const;
  /// Reads what caller `fd` sent: the caller once its proof holds (no longer one of these); none
  /// while its bytes are not all in, or once it was ended (a wrong proof, its end, an error).
  std::optional<proven> readable(int fd);
  /// Ends the callers whose patience ran out by `now`.
  void expire(clock::time_point now);
  /// When the next caller's patience runs out; none without callers.
  std::optional<clock::time_point> next_deadline() const;
  std::size_t size() const noexcept { return callers_.size(); }

 private:
  struct caller {
    int fd = -1;
    reattach_challenge mine{};
    std::string got;  // what it sent so far: its challenge, then its proof
    clock::time_point deadline;
  };
  void end(std::size_t at);

  std::string secret_;
  std::size_t limit_;
  std::chrono::milliseconds patience_;
  std::vector<caller> callers_;  // oldest first
};

}  // namespace fiber::detail
