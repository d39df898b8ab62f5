#include "backend/warm_spare.hpp"

#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <vector>

namespace fiber::detail {

namespace {
[[noreturn]] void wait_to_be_used(int fd, pid_t master, warm_spare::become_child become) {
  ::prctl(PR_SET_NAME, spare_name);
  // A spare's parent is the master: the master's death must end it, as it ends every worker.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != master) std::_Exit(0);  // the master died before the line above
  std::vector<char> env(max_environment);
  ssize_t n;
  while ((n = ::recv(fd, env.data(), env.size(), 0)) < 0 && errno == EINTR) {
  }
  if (n <= 0) std::_Exit(0);  // the fork server has gone: nobody will use this spare
  ::close(fd);
  become(env.data(), static_cast<std::size_t>(n));
  std::_Exit(70);
}
}  // namespace

warm_spare::~warm_spare() {
  if (fd_ >= 0) ::close(fd_);  // the spare reads end-of-file and leaves
}

bool warm_spare::fork(int server_fd, pid_t master, become_child become) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return false;
  long pid = ::syscall(SYS_clone, CLONE_PARENT | SIGCHLD, nullptr, nullptr, nullptr, nullptr);
  if (pid == 0) {
    ::close(server_fd);
    ::close(sv[0]);
    wait_to_be_used(sv[1], master, become);
  }
  ::close(sv[1]);
  if (pid < 0) {
    ::close(sv[0]);
    return false;
  }
  pid_ = static_cast<pid_t>(pid);
  fd_ = sv[0];
  return true;
}

pid_t warm_spare::hand_over(const char* env, std::size_t size) {
  ssize_t sent;
  while ((sent = ::send(fd_, env, size, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  pid_t took = sent == static_cast<ssize_t>(size) ? pid_ : 0;
  ::close(fd_);
  fd_ = -1;
  pid_ = 0;
  return took;
}

}  // namespace fiber::detail
