#include "runtime/links/reattach_point.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <system_error>
#include <utility>
#include <vector>

#include "core/log.hpp"
#include "core/random_token.hpp"
#include "runtime/links/reattach_wire.hpp"

namespace fiber::detail {
namespace {
int open_pidfd(int pid) noexcept {
  if (pid <= 0) return -1;
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}

/// A dialling master that stops answering holds the point's thread no longer than this, and one
/// that has not proven the secret by then is dropped.
constexpr int peer_patience_s = 5;
/// The callers not yet proven held at once (the oldest goes for a new one).
constexpr std::size_t max_callers = 16;
}  // namespace

reattach_point::reattach_point(int master_pid, std::chrono::milliseconds grace, handlers h, const std::string& tcp_host)
    : secret_(random_token() + random_token()),
      grace_(grace),
      handlers_(std::move(h)),
      unix_(tcp_host.empty()),
      callers_(secret_, max_callers, std::chrono::seconds(peer_patience_s)) {
  if (unix_) bind_unix();
  else bind_tcp(tcp_host);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  pidfd_ = open_pidfd(master_pid);
  // A master already gone (the pid is no longer there) starts the grace at once.
  if (master_pid > 0 && pidfd_ < 0) gone_ = true;
  thread_ = std::thread([this] { run(); });
}

void reattach_point::bind_unix() {
  name_ = "fiber-reattach-" + random_token();
  listener_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener_ < 0) throw std::system_error(errno, std::generic_category(), "a reattach point's socket");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, name_.data(), name_.size());
  auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name_.size());
  if (::bind(listener_, reinterpret_cast<const sockaddr*>(&addr), length) != 0 || ::listen(listener_, 16) != 0) {
    int e = errno;
    ::close(listener_);
    throw std::system_error(e, std::generic_category(), "binding a reattach point");
  }
}

void reattach_point::bind_tcp(const std::string& host) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1)
    throw std::system_error(EINVAL, std::generic_category(), "a reattach point's address (an IPv4 address) " + host);
  listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener_ < 0) throw std::system_error(errno, std::generic_category(), "a reattach point's socket");
  socklen_t length = sizeof addr;
  if (::bind(listener_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listener_, 16) != 0 ||
      ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &length) != 0) {
    int e = errno;
    ::close(listener_);
    throw std::system_error(e, std::generic_category(), "binding a reattach point on " + host);
  }
  name_ = "tcp:" + host + ":" + std::to_string(ntohs(addr.sin_port));
}

reattach_point::~reattach_point() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake();
  if (thread_.joinable()) thread_.join();
  for (int fd : {listener_, pidfd_, wake_fd_})
    if (fd >= 0) ::close(fd);
}

void reattach_point::master_gone() noexcept {
  {
    std::lock_guard lock(mutex_);
    gone_ = true;
  }
  wake();
}

void reattach_point::announce_gone() {
  if (!std::exchange(announced_, true) && handlers_.gone) handlers_.gone();
}

void reattach_point::wake() const noexcept {
  std::uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!::write(wake_fd_, &one, sizeof one);
}

void reattach_point::run() {
  using clock = std::chrono::steady_clock;
  std::optional<clock::time_point> deadline;
  for (;;) {
    bool gone;
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      gone = gone_;
    }
    if (gone && !deadline) {
      announce_gone();
      deadline = clock::now() + grace_;
      logf(log_level::info, "the master is gone; this worker waits ", grace_.count(),
           " ms (reattach_grace_ms) for the master that takes the run up");
    }
    // A TCP point takes a dial before its link says the master is gone: a master that proves the
    // secret holds the run's journal, which its last master no longer does.
    bool listening = gone || !unix_;
    std::vector<pollfd> fds{{wake_fd_, POLLIN, 0}};
    if (listening || pidfd_ >= 0) fds.push_back({listening ? listener_ : pidfd_, POLLIN, 0});
    auto listened = fds.size();
    callers_.watch(fds);
    auto until = deadline;
    if (auto next = callers_.next_deadline(); next && (!until || *next < *until)) until = next;
    int timeout = -1;
    if (until)
      timeout = static_cast<int>(std::max<long long>(
          0, std::chrono::duration_cast<std::chrono::milliseconds>(*until - clock::now()).count()));
    int ready = ::poll(fds.data(), static_cast<nfds_t>(fds.size()), timeout);
    if (ready < 0 && errno == EINTR) continue;
    callers_.expire(clock::now());
    if (deadline && clock::now() >= *deadline) {
      logf(log_level::error, "no master took this worker up within reattach_grace_ms (", grace_.count(), " ms); exiting");
      handlers_.expired();
      return;
    }
    if (ready <= 0) continue;
    if (fds[0].revents) {
      std::uint64_t n;
      (void)!::read(wake_fd_, &n, sizeof n);
    }
    if (listened == 2 && fds[1].revents) {
      if (!listening) {  // the master's process ended
        ::close(std::exchange(pidfd_, -1));
        std::lock_guard lock(mutex_);
        gone_ = true;
        continue;
      }
      admit();
    }
    for (auto i = listened; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      auto proven = callers_.readable(fds[i].fd);
      if (!proven) continue;
      if (serve(*proven)) deadline.reset();  // serve() watches the new master
      break;  // the callers changed: polled again
    }
  }
}

void reattach_point::admit() {
  int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) return;
  ucred peer{};
  socklen_t size = sizeof peer;
  if (unix_ && (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0 || peer.uid != ::geteuid())) {
    logf(log_level::warn, "refused a dial at this worker's reattach point from user ", peer.uid, " (only ", ::geteuid(),
         ", the run's, may take it up)");
    ::close(fd);
    return;
  }
  callers_.add(fd, std::chrono::steady_clock::now());
}

bool reattach_point::serve(const reattach_callers::proven& caller) {
  bool taken = false;
  try {
    taken = take(caller.fd, caller.mine, caller.theirs);
  } catch (const std::exception& e) {
    // What the worker holds could not be said, or the master's record could not be taken: the
    // worker goes on waiting for the grace, for that master to dial again or another.
    logf(log_level::warn, "a master taking the run up dialled this worker, and its record was not taken: ", e.what());
  }
  ::close(caller.fd);
  return taken;
}

bool reattach_point::take(int fd, const reattach_challenge& mine, const reattach_challenge& theirs) {
  // The caller proved the secret: what follows is read in turn, each step given the patience.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  timeval patience{peer_patience_s, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof patience);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &patience, sizeof patience);
  {
    std::lock_guard lock(mutex_);
    gone_ = true;  // a dial its link had not announced yet
  }
  announce_gone();
  auto key = reattach_key(secret_, mine, theirs);
  auto state = reattach_seal(key, reattach_way::to_master, handlers_.state());
  auto answer = reattach_prove(secret_, "worker", theirs, mine);
  auto n = static_cast<std::uint32_t>(state.size());
  std::string reply(reinterpret_cast<const char*>(answer.data()), answer.size());
  reply.append(reinterpret_cast<const char*>(&n), sizeof n);
  reply += state;
  std::uint32_t length = 0;
  if (!write_all(fd, reply) || !read_all(fd, &length, sizeof length) ||
      length > reattach_record_limit + reattach_seal_bytes)
    return false;
  std::string sealed(length, '\0'), record;
  if (!read_all(fd, sealed.data(), sealed.size())) return false;
  if (!reattach_unseal(key, reattach_way::to_worker, sealed, record)) {
    logf(log_level::warn, "refused a record at this worker's reattach point: it was not sealed in this session (changed "
                          "on its way?)");
    return false;
  }
  if (record.empty()) {
    logf(log_level::info, "the master that took the run up told this worker to leave");
    handlers_.expired();
    return true;
  }
  int next = handlers_.relink(std::move(record));
  announced_ = false;
  std::lock_guard lock(mutex_);
  pidfd_ = open_pidfd(next);
  gone_ = false;
  return true;
}

}  // namespace fiber::detail
