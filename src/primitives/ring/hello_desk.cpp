#include "primitives/ring/hello_desk.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/same_secret.hpp"

namespace fiber::detail {

struct hello_desk::hello {
  int fd = -1;
  bool across_hosts = false;
  std::unique_ptr<sealed_link> tls;  // across hosts
  std::string got;                // the hello's bytes so far
  std::vector<int> fds;           // passed with them (on this host)
  std::chrono::steady_clock::time_point until;
  ~hello() {
    tls.reset();
    if (fd >= 0) ::close(fd);
    for (int passed : fds) ::close(passed);
  }
};

hello_desk::hello_desk(int unix_listener, int tcp_listener, std::string secret, int my_rank)
    : unix_listener_(unix_listener),
      tcp_listener_(tcp_listener),
      secret_(std::move(secret)),
      key_(sealed_link::key_for_ring(secret_)),
      my_rank_(my_rank) {}

hello_desk::~hello_desk() = default;

void hello_desk::want(std::vector<pollfd>& pf) const {
  pf.push_back({unix_listener_, POLLIN, 0});
  pf.push_back({tcp_listener_, POLLIN, 0});
  for (auto& h : hellos_) pf.push_back({h->fd, h->tls ? h->tls->wanted_events() : short(POLLIN), 0});
}

namespace {
/// Reads what a hello on this host holds, without waiting: up to `need` bytes into `got`, and the
/// descriptors passed with them. False when the peer hung up or the socket broke.
bool read_local(int fd, std::string& got, std::size_t need, std::vector<int>& fds) {
  while (got.size() < need) {
    char buf[256];
    iovec iov{buf, std::min(sizeof buf, need - got.size())};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(8 * sizeof(int))];
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    auto r = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (r >= 0) {
      for (auto* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        auto count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t k = 0; k < count; ++k) {
          int passed;
          std::memcpy(&passed, CMSG_DATA(c) + k * sizeof(int), sizeof passed);
          fds.push_back(passed);
        }
      }
    }
    if (r > 0) {
      got.append(buf, static_cast<std::size_t>(r));
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    return r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
  return true;
}

/// Whether a connection to the unix listener comes from a process of this user (abstract names
/// have no permissions: any user of the host may connect).
bool same_user(int fd) {
  ucred who{};
  socklen_t len = sizeof who;
  return ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &who, &len) == 0 && who.uid == ::geteuid();
}
}  // namespace

bool hello_desk::advance(hello& h, std::vector<admitted_link>& out, const std::function<bool(int)>& wanted) {
  std::int32_t rank = -1;
  if (h.across_hosts) {
    if (!h.tls->handshake_done()) {
      auto step = h.tls->handshake();
      if (step == tls_session::step::failed) return true;  // not a member of this ring
      if (step == tls_session::step::more) return false;
    }
    char buf[sizeof rank];
    while (h.got.size() < sizeof rank) {
      auto r = h.tls->recv_some(buf, sizeof rank - h.got.size());
      if (r < 0) return true;
      if (r == 0) return false;
      h.got.append(buf, static_cast<std::size_t>(r));
    }
    std::memcpy(&rank, h.got.data(), sizeof rank);
  } else {
    auto need = sizeof rank + secret_.size();
    if (!read_local(h.fd, h.got, need, h.fds)) return true;
    if (h.got.size() < need) return false;
    std::memcpy(&rank, h.got.data(), sizeof rank);
    if (!same_secret(std::string_view(h.got).substr(sizeof rank), secret_)) return true;
  }
  if (rank < 0 || rank >= my_rank_ || !wanted(rank)) return true;
  admitted_link l;
  l.rank = rank;
  if (h.fds.size() == 3) {
    l.shared = shared_channel::join(h.fds[0], h.fds[1], h.fds[2]);
    h.fds.clear();  // taken over (closed by the channel, made or not)
    // The dialer writes into the segment: a link that cannot map it is closed, and the dialer's
    // next step fails with member_lost instead of waiting for bytes never read.
    if (!l.shared) return true;
  } else if (!h.across_hosts) {
    return true;  // a hello on this host brings its segment
  }
  l.fd = std::exchange(h.fd, -1);
  l.tls = std::move(h.tls);
  out.push_back(std::move(l));
  return true;
}

std::vector<admitted_link> hello_desk::step(const std::function<bool(int)>& wanted) {
  for (int listener : {unix_listener_, tcp_listener_}) {
    for (;;) {
      int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) break;
      bool across = listener == tcp_listener_;
      if (hellos_.size() >= most_waiting || (!across && !same_user(fd))) {
        ::close(fd);
        continue;
      }
      auto h = std::make_unique<hello>();
      h->fd = fd;
      h->across_hosts = across;
      h->until = std::chrono::steady_clock::now() + hello_limit;
      if (across) {
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        h->tls = std::make_unique<sealed_link>(fd, tls_session::role::server, key_);
      }
      hellos_.push_back(std::move(h));
    }
  }
  std::vector<admitted_link> out;
  auto now = std::chrono::steady_clock::now();
  for (std::size_t k = 0; k < hellos_.size();) {
    // What arrived counts first, however late this member looks: only a hello still unfinished
    // past its limit is dropped.
    if (advance(*hellos_[k], out, wanted) || now >= hellos_[k]->until) {
      hellos_.erase(hellos_.begin() + static_cast<std::ptrdiff_t>(k));
      continue;
    }
    ++k;
  }
  return out;
}

}  // namespace fiber::detail
