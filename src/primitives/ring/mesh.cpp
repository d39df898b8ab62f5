#include "primitives/ring/mesh.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <sched.h>
#include <chrono>
#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <unordered_map>

#include "core/same_secret.hpp"
#include "core/worker_env.hpp"
#include "fiber/error.hpp"
#include "fiber/ring.hpp"

namespace fiber::detail {

void ring_member_lost(int peer, const std::string& what) {
  throw error(errc::member_lost, "ring member " + std::to_string(peer) + ": " + what);
}

namespace {
constexpr int stall_ms = mesh_stall_ms;
[[noreturn]] void lost(int peer, const std::string& what) { ring_member_lost(peer, what); }

sockaddr_un abstract_address(const std::string& name, socklen_t& len) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, name.data(), std::min(name.size(), sizeof addr.sun_path - 2));
  len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return addr;
}

}  // namespace

namespace {
void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }
}  // namespace

member_mesh::member_mesh(const ring_member& me) : me_(me) {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  host_ = name;
  listen();
}

member_mesh::~member_mesh() {
  desk_.reset();
  for (auto& [rank, l] : links_) {
    l.tls.reset();
    ::close(l.fd);
  }
  if (unix_listener_ >= 0) ::close(unix_listener_);
  if (tcp_listener_ >= 0) ::close(tcp_listener_);
}

void member_mesh::listen() {
  // Bound first (port 0, a fresh abstract name), published after: no window for a collision.
  // Unique across hosts' namespaces too: containers on the host network share abstract names,
  // and every one of them may have pid 7 and the same ring number.
  std::random_device rd;
  auto name = "fiber-ring-" + std::to_string(me_.identity().ring) + "-" + std::to_string(me_.rank()) + "-" +
              std::to_string((std::uint64_t{rd()} << 32) | rd());
  unix_listener_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  socklen_t len;
  auto ua = abstract_address(name, len);
  if (unix_listener_ < 0 || ::bind(unix_listener_, reinterpret_cast<sockaddr*>(&ua), len) != 0 || ::listen(unix_listener_, 64) != 0)
    throw error(errc::spawn_failed, std::string("a ring member cannot listen on a unix socket: ") + std::strerror(errno));
  tcp_listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in ta{};
  ta.sin_family = AF_INET;
  ta.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t tlen = sizeof ta;
  if (tcp_listener_ < 0 || ::bind(tcp_listener_, reinterpret_cast<sockaddr*>(&ta), sizeof ta) != 0 ||
      ::listen(tcp_listener_, 64) != 0 || ::getsockname(tcp_listener_, reinterpret_cast<sockaddr*>(&ta), &tlen) != 0)
    throw error(errc::spawn_failed, std::string("a ring member cannot listen on TCP: ") + std::strerror(errno));
  set_nonblocking(unix_listener_);
  set_nonblocking(tcp_listener_);
  desk_ = std::make_unique<hello_desk>(unix_listener_, tcp_listener_, me_.identity().secret, me_.rank());
  me_.set("fiber/mesh/" + std::to_string(me_.rank()),
          host_ + "|" + name + "|" + reachable_address() + "|" + std::to_string(ntohs(ta.sin_port)))
      .get();
}

member_mesh::peer_link& member_mesh::link(int peer) {
  if (auto it = links_.find(peer); it != links_.end()) return it->second;
  if (peer > me_.rank()) {
    // The lower rank dials: the peer's address, once it has published it.
    auto where = me_.get("fiber/mesh/" + std::to_string(peer)).get();
    std::vector<std::string> f;
    for (std::size_t at = 0;;) {
      auto bar = where.find('|', at);
      f.push_back(where.substr(at, bar - at));
      if (bar == std::string::npos) break;
      at = bar + 1;
    }
    if (f.size() != 4) lost(peer, "published an unreadable address '" + where + "'");
    int fd;
    int rc;
    if (f[0] == host_) {
      fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      socklen_t len;
      auto ua = abstract_address(f[1], len);
      rc = ::connect(fd, reinterpret_cast<sockaddr*>(&ua), len);
    } else {
      fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in ta{};
      ta.sin_family = AF_INET;
      ta.sin_port = htons(static_cast<std::uint16_t>(std::stoi(f[3])));
      ::inet_pton(AF_INET, f[2].c_str(), &ta.sin_addr);
      rc = ::connect(fd, reinterpret_cast<sockaddr*>(&ta), sizeof ta);
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    if (rc != 0) {
      auto why = std::string(std::strerror(errno));
      ::close(fd);
      lost(peer, "cannot be reached at " + where + ": " + why);
    }
    if (f[0] != host_) return dial_across_hosts(peer, fd);
    // On this host the hello carries the ring's secret (the kernel keeps a unix socket between
    // the two processes), a shared memory segment and its doorbells: the link is ready at once,
    // without waiting for the peer to accept.
    std::string hello(sizeof(std::int32_t), '\0');
    std::int32_t rank = me_.rank();
    std::memcpy(hello.data(), &rank, sizeof rank);
    hello += me_.identity().secret;
    std::unique_ptr<shared_channel> shared = shared_channel::make();
    iovec iov{hello.data(), hello.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))] = {};
    int fds[3] = {shared->segment_fd(), shared->dialer_bell(), shared->acceptor_bell()};
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    auto* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof fds);
    std::memcpy(CMSG_DATA(c), fds, sizeof fds);
    if (::sendmsg(fd, &msg, MSG_NOSIGNAL) != static_cast<ssize_t>(hello.size())) {
      ::close(fd);
      lost(peer, "closed its link while it was made");
    }
    set_nonblocking(fd);
    auto& l = links_[peer];
    l.fd = fd;
    l.shared = std::move(shared);
    return l;
  }
  return accept_from(peer);
}

member_mesh::peer_link& member_mesh::dial_across_hosts(int peer, int fd) {
  // TLS with the ring's key, then this member's rank, encrypted. The peer answers the handshake
  // whenever it waits on anything in its mesh (it takes hellos then); meanwhile this member takes
  // the hellos made to it.
  set_nonblocking(fd);
  auto tls = std::make_unique<sealed_link>(fd, tls_session::role::client, sealed_link::key_for_ring(me_.identity().secret));
  auto fail = [&](const std::string& what) {
    auto why = tls->why().empty() ? what : what + ": " + tls->why();
    tls.reset();
    ::close(fd);
    lost(peer, why);
  };
  std::int32_t rank = me_.rank();
  bool said_rank = false;
  auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(stall_ms);
  for (;;) {
    if (!tls->handshake_done()) {
      auto step = tls->handshake();
      if (step == tls_session::step::failed) fail("refused this member's link (is it of this ring?)");
    }
    if (tls->handshake_done() && !said_rank) {
      auto n = tls->send_some(&rank, sizeof rank);
      if (n < 0) fail("closed its link while it was made");
      said_rank = n > 0;
    }
    if (said_rank && !tls->has_output()) break;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up - std::chrono::steady_clock::now()).count();
    if (left <= 0) fail("did not answer this member's link within 60 s");
    poll_set_.assign(1, pollfd{fd, tls->wanted_events(), 0});
    wait(poll_set_, static_cast<int>(std::min<long long>(left, 500)));
  }
  auto& l = links_[peer];
  l.fd = fd;
  l.tls = std::move(tls);
  return l;
}

void member_mesh::take_hellos() {
  for (auto& a : desk_->step([this](int rank) { return !links_.count(rank); })) {
    if (links_.count(a.rank)) {  // two hellos of one rank in one step: the first stands
      a.tls.reset();
      a.shared.reset();
      ::close(a.fd);
      continue;
    }
    auto& l = links_[a.rank];
    l.fd = a.fd;
    l.shared = std::move(a.shared);
    l.tls = std::move(a.tls);
  }
}

int member_mesh::wait(std::vector<pollfd>& pf, int ms) {
  auto own = pf.size();
  desk_->want(pf);
  int r = ::poll(pf.data(), static_cast<nfds_t>(pf.size()), ms);
  if (r < 0 && errno == EINTR) r = 0;
  bool desk_moved = false, own_ready = false;
  for (std::size_t k = 0; k < pf.size(); ++k)
    if (pf[k].revents) (k < own ? own_ready : desk_moved) = true;
  pf.resize(own);
  if (desk_moved) take_hellos();
  return own_ready || desk_moved ? 1 : r < 0 ? -1 : 0;
}

member_mesh::peer_link& member_mesh::accept_from(int peer) {
  auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(stall_ms);
  auto next_look = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  take_hellos();
  while (!links_.count(peer)) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up - std::chrono::steady_clock::now()).count();
    if (left <= 0) lost(peer, "did not link to this member within 60 s");
    poll_set_.clear();
    wait(poll_set_, static_cast<int>(std::min<long long>(left, 500)));
    if (links_.count(peer) || std::chrono::steady_clock::now() < next_look) continue;
    next_look = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    // Still nobody: once a member has failed, a get of a key nobody sets says so (member_lost)
    // at once, even for a peer that published its address before it died.
    try {
      (void)me_.get("fiber/never-set", std::chrono::milliseconds(1)).get();
    } catch (const error& e) {
      if (e.code() == errc::member_lost) throw;
    }
  }
  return links_[peer];
}

member_mesh& mesh_of(const ring_member& me) {
  // One thread at a time uses a ring's mesh (collective_thread keeps them in order), but two
  // rings may be used from two threads.
  static std::mutex m;
  static auto* meshes = new std::unordered_map<std::uint64_t, std::unique_ptr<member_mesh>>;
  std::unique_lock lock(m);
  auto& mesh = (*meshes)[me.identity().ring];
  if (mesh) return *mesh;
  lock.unlock();  // making it waits for the peers' addresses in the store
  auto made = std::make_unique<member_mesh>(me);
  lock.lock();
  auto& slot = (*meshes)[me.identity().ring];
  if (!slot) slot = std::move(made);
  return *slot;
}

}  // namespace fiber::detail
