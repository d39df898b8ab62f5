// Where a durable run's worker waits for a new master when its own dies, so that what it was
// running and the results it holds are not lost with the master: an abstract unix socket of a
// random name, proven to by a secret of the worker's own (the master journals both), and a thread
// that, once the master is gone, waits reattach_grace_ms for another to dial in, then ends the
// process as a worker without a master always ends (orphans stay impossible).
//
// The master's end is seen by the kernel where the master runs on this host (a pidfd of its
// process), or told by the worker's link (master_gone()). Until then a unix point's thread sleeps
// in poll and takes no connection: dialling in is for a master that takes the run up. A TCP
// point (a worker elsewhere, whose link may take heartbeat_timeout_ms to say the master is gone)
// takes a dial at any time: a master that proves the secret is one that took the run up. Once a master has proven
// the secret, the point tells it what the worker holds and hands its record (where to link again)
// to `relink`, on the point's thread; `relink` says which process to watch next. The wire is
// runtime/links/reattach_wire.hpp.
#pragma once
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/links/reattach_callers.hpp"

namespace fiber::detail {

class reattach_point {
 public:
  struct handlers {
    /// What the worker holds, for the master that proved the secret (its held results, what it
    /// runs). On the point's thread.
    std::function<std::string()> state;
    /// The master's record: where and how to link again. Returns the pid of the new master to
    /// watch on this host (0: none; master_gone() will tell). On the point's thread.
    std::function<int(std::string record)> relink;
    /// The grace passed without a master, or one told the worker to leave: the worker ends.
    std::function<void()> expired;
    /// The master is gone (said once per master, before any dial is taken). On the point's thread.
    std::function<void()> gone = nullptr;
  };

  /// Binds a fresh name and starts the thread. `master_pid`: the master's process when it runs on
  /// this host (watched by a pidfd), else 0. `tcp_host`: empty for an abstract unix socket (a
  /// master on this host; the kernel says who dials), else the IPv4 address to listen on at a
  /// port of the kernel's choosing (a master elsewhere; the name is then "tcp:HOST:PORT"). Throws
  /// std::system_error when no socket can be bound.
  reattach_point(int master_pid, std::chrono::milliseconds grace, handlers h, const std::string& tcp_host = {});
  ~reattach_point();  // stops the thread; the name is free again
  reattach_point(const reattach_point&) = delete;
  reattach_point& operator=(const reattach_point&) = delete;

  /// The point's name (an abstract socket's, without its leading NUL; or "tcp:HOST:PORT") and the
  /// secret a master must prove.
  const std::string& name() const noexcept { return name_; }
  const std::string& secret() const noexcept { return secret_; }
  /// The worker's link to its master closed: the grace begins (once). From any thread.
  void master_gone() noexcept;

 private:
  void bind_unix();
  void bind_tcp(const std::string& host);
  void run();
  /// Accepts a dial and greets it (a unix point: only the worker's own user's).
  void admit();
  /// A caller that proved the secret: true when it took the worker up (or told it to leave).
  bool serve(const reattach_callers::proven& caller);
  bool take(int fd, const reattach_challenge& mine, const reattach_challenge& theirs);
  void wake() const noexcept;
  /// handlers_.gone, once per master. On the point's thread.
  void announce_gone();

  std::string name_, secret_;
  std::chrono::milliseconds grace_;
  handlers handlers_;
  bool unix_;  // an abstract unix socket (else TCP): the kernel says who dials
  int listener_ = -1, pidfd_ = -1, wake_fd_ = -1;  // wake_fd_: an eventfd, for master_gone and the end
  std::mutex mutex_;
  bool gone_ = false, stopping_ = false;  // under mutex_
  bool announced_ = false;                // the point's thread's own
  reattach_callers callers_;              // the point's thread's own
  std::thread thread_;                    // last: it starts once everything above exists
};

}  // namespace fiber::detail
