// The fork server's warm spare: a child forked before anyone asks for one, that waits for its
// environment. Asked for a child, the fork server hands the spare the environment and answers at
// once; the fork (0.2-0.3 ms of copying the page tables of a process this size) happens after
// the answer, off the path of the process being started. Only the fork server uses it.
#pragma once
#include <sys/types.h>

#include <cstddef>

namespace fiber::detail {

/// The process name of a spare until it is handed an environment: tests and tools tell it from
/// the workers by it (it belongs to the fork server, and ends with it).
inline constexpr const char* spare_name = "fiber-spare";
/// The largest environment a child can be handed, in bytes.
inline constexpr std::size_t max_environment = std::size_t{64} * 1024;

class warm_spare {
 public:
  /// What a child does with the environment it was handed ("K=V\0" each, `size` bytes in all):
  /// it becomes the worker and never returns.
  using become_child = void (*)(char* env, std::size_t size);

  warm_spare() = default;
  warm_spare(const warm_spare&) = delete;
  warm_spare& operator=(const warm_spare&) = delete;
  ~warm_spare();

  /// Forks the spare, a sibling of the fork server (CLONE_PARENT: the master reaps and watches
  /// it, as every child it asked for). `server_fd` is the fork server's link to the master, which
  /// the spare closes; `master` is the pid the spare checks is its parent, and it dies with it.
  /// False (and no spare) when the fork fails: the next child is forked when asked for.
  bool fork(int server_fd, pid_t master, become_child become);

  bool ready() const noexcept { return pid_ > 0; }
  pid_t pid() const noexcept { return pid_; }

  /// Hands the spare its environment and lets go of it: its pid when it took it, 0 when it had
  /// died (killed from outside; its parent, the master, reaps it).
  pid_t hand_over(const char* env, std::size_t size);

 private:
  pid_t pid_ = 0;
  int fd_ = -1;  // the fork server's end of the pair the environment goes through
};

}  // namespace fiber::detail
