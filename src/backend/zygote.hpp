// The fork server of the local backend: a helper process, exec'd once, with no threads and no
// ZeroMQ context, that forks children on request. A child is cloned with CLONE_PARENT, so the
// master is its parent (it reaps it, watches it through a pidfd, and the child's parent-death
// signal follows the master). This skips exec and dynamic linking for every child. After each
// child it forks a spare that waits for the next one's environment (backend/warm_spare.hpp).
#pragma once
#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

namespace fiber::detail {

class zygote {
 public:
  /// Starts the helper from `executable`; nullptr (and a log line) when it cannot.
  static std::unique_ptr<zygote> start(const std::string& executable);
  ~zygote();
  zygote(const zygote&) = delete;

  /// Forks a worker with exactly the environment `env` ("K=V" each). Returns its pid, or -errno.
  pid_t fork_worker(const std::vector<std::string>& env);
  pid_t pid() const noexcept { return pid_; }
  /// Waits until the helper says which spare it forked after the last child, and returns its
  /// pid (0 when it could not fork one, or the helper ended).
  pid_t await_spare();

 private:
  zygote(int fd, pid_t pid) : fd_(fd), pid_(pid) {}
  /// One answer of the helper: a child's pid (or -errno) in `child`, or the spare it forked
  /// since (`child` untouched). False when the helper ended, or gave none in `timeout_ms` (-1: no bound).
  bool read_answer(pid_t& child, int timeout_ms);
  /// A spare is this process's child until it is used: one that the helper gave up (it died) or
  /// that outlives the helper is reaped here.
  void reap_spare() noexcept;
  int fd_;
  pid_t pid_;
  pid_t spare_ = 0;
  int spares_announced_ = 0;
};

/// The helper's side: serves requests on `fd` until the master closes it. Never returns. Each
/// forked child calls `run_child`, which must not return (the worker's life, from the runtime).
[[noreturn]] void run_zygote(int fd, void (*run_child)());

inline constexpr const char* zygote_flag = "--fiber-zygote";
/// The fork server's process name (/proc/PID/comm); its children are named "fiber-worker".
inline constexpr const char* fork_server_name = "fiber-forksrv";
inline constexpr const char* env_zygote_fd = "FIBER_WORKER_ZYGOTE_FD";

}  // namespace fiber::detail
