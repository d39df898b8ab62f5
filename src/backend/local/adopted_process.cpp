#include "backend/local/adopted_process.hpp"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <asio/posix/stream_descriptor.hpp>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <optional>

#include "backend/engine_run.hpp"
#include "fiber/error.hpp"

namespace fiber::detail {
namespace {

constexpr const char* unknown_code = "taken up from an earlier master, whose child it was: its exit code is unknown";

class adopted_run final : public engine_run, public std::enable_shared_from_this<adopted_run> {
 public:
  adopted_run(asio::io_context& io, int p, int pidfd) : engine_run({}), fd_(std::in_place, io, pidfd) { pid = p; }
  ~adopted_run() override { kill_and_reap(); }

  void start() { wait_for_exit(); }
  void reported_pid(int) override {}  // its pid is this host's already

  void signal(int sig) noexcept override {
    if (!ended_) ::syscall(SYS_pidfd_send_signal, fd_->native_handle(), sig, nullptr, 0);
  }

  void kill_and_reap() noexcept override {
    if (ended_) return;
    ended_ = true;
    forget_waiters();  // the caller reports the end itself
    ::syscall(SYS_pidfd_send_signal, fd_->native_handle(), SIGKILL, nullptr, 0);
    // Not a child: there is nothing to reap, but its end is waited for (a pidfd turns readable
    // when the process is gone), so that nothing of it outlives its job.
    pollfd p{fd_->native_handle(), POLLIN, 0};
    while (::poll(&p, 1, 5000) < 0 && errno == EINTR) {
    }
    std::error_code ignored;
    fd_->cancel(ignored);
    report_end(-SIGKILL);
  }

 private:
  void wait_for_exit() {
    fd_->async_wait(asio::posix::stream_descriptor::wait_read, [self = shared_from_this()](std::error_code ec) {
      if (ec || self->ended_) return;
      self->ended_ = true;
      self->report_end(0, unknown_code);
    });
  }

  std::optional<asio::posix::stream_descriptor> fd_;
  bool ended_ = false;
};

}  // namespace

std::unique_ptr<job> adopt_local_process(asio::io_context& io, int pid) {
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0)
    throw error(errc::spawn_failed, "process " + std::to_string(pid) + " of an earlier master is gone (pidfd_open: " +
                                        std::strerror(errno) + ")");
  auto run = std::make_shared<adopted_run>(io, pid, fd);
  run->start();
  return std::make_unique<job>(run);
}

}  // namespace fiber::detail
