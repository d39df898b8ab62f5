#include "primitives/ring/mesh.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <unordered_map>

#include "core/worker_env.hpp"
#include "fiber/error.hpp"
#include "fiber/ring.hpp"

namespace fiber::detail {

namespace {
// A link that makes no progress for this long is taken for lost (its member hangs or is gone).
constexpr int stall_ms = 60'000;

[[noreturn]] void lost(int peer, const std::string& what) {
  throw error(errc::member_lost, "ring member " + std::to_string(peer) + ": " + what);
}

sockaddr_un abstract_address(const std::string& name, socklen_t& len) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, name.data(), std::min(name.size(), sizeof addr.sun_path - 2));
  len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return addr;
}

}  // namespace

std::string reachable_address() {
  const char* endpoint = std::getenv(env_endpoint);
  std::string e = endpoint ? endpoint : "";
  if (!e.starts_with("tcp://")) return "127.0.0.1";
  auto hostport = e.substr(6);
  auto host = hostport.substr(0, hostport.rfind(':'));
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  if (::getaddrinfo(host.c_str(), "9", &hints, &res) != 0 || !res) return "127.0.0.1";
  std::string ip = "127.0.0.1";
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s >= 0 && ::connect(s, res->ai_addr, res->ai_addrlen) == 0) {
    sockaddr_in local{};
    socklen_t len = sizeof local;
    char text[INET_ADDRSTRLEN];
    if (::getsockname(s, reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
        ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof text))
      ip = text;
  }
  if (s >= 0) ::close(s);
  ::freeaddrinfo(res);
  return ip;
}

namespace {
void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

/// Reads exactly n bytes from a non-blocking socket, waiting at most stall_ms without progress.
bool read_exact(int fd, void* out, std::size_t n) {
  auto* p = static_cast<char*>(out);
  while (n) {
    auto r = ::recv(fd, p, n, 0);
    if (r > 0) {
      p += r;
      n -= static_cast<std::size_t>(r);
      continue;
    }
    if (r == 0) return false;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
    pollfd pf{fd, POLLIN, 0};
    if (::poll(&pf, 1, stall_ms) <= 0) return false;
  }
  return true;
}
}  // namespace

member_mesh::member_mesh(const ring_member& me) : me_(me) {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  host_ = name;
  listen();
}

member_mesh::~member_mesh() {
  for (auto& [rank, fd] : links_) ::close(fd);
  if (unix_listener_ >= 0) ::close(unix_listener_);
  if (tcp_listener_ >= 0) ::close(tcp_listener_);
}

void member_mesh::listen() {
  // Bound first (port 0, a fresh abstract name), published after: no window for a collision.
  // Unique across hosts' namespaces too: containers on the host network share abstract names,
  // and every one of them may have pid 7 and the same ring number.
  std::random_device rd;
  auto name = "fiber-ring-" + std::to_string(me_.ring_id()) + "-" + std::to_string(me_.rank()) + "-" +
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
  me_.set("fiber/mesh/" + std::to_string(me_.rank()),
          host_ + "|" + name + "|" + reachable_address() + "|" + std::to_string(ntohs(ta.sin_port)))
      .get();
}

int member_mesh::link(int peer) {
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
    std::string hello(sizeof(std::int32_t), '\0');
    std::int32_t rank = me_.rank();
    std::memcpy(hello.data(), &rank, sizeof rank);
    hello += me_.secret();
    if (::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(hello.size())) {
      ::close(fd);
      lost(peer, "closed its link while it was made");
    }
    set_nonblocking(fd);
    return links_[peer] = fd;
  }
  return accept_from(peer);
}

int member_mesh::accept_from(int peer) {
  auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(stall_ms);
  while (!links_.count(peer)) {
    pollfd pf[2] = {{unix_listener_, POLLIN, 0}, {tcp_listener_, POLLIN, 0}};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up - std::chrono::steady_clock::now()).count();
    if (left <= 0) lost(peer, "did not link to this member within 60 s");
    if (::poll(pf, 2, static_cast<int>(std::min<long long>(left, 500))) <= 0) {
      // Still nobody: once a member has failed, a get of a key nobody sets says so (member_lost)
      // at once, even for a peer that published its address before it died.
      try {
        (void)me_.get("fiber/never-set", std::chrono::milliseconds(1)).get();
      } catch (const error& e) {
        if (e.code() == errc::member_lost) throw;
      }
      continue;
    }
    for (auto& p : pf) {
      if (!(p.revents & POLLIN)) continue;
      int fd = ::accept4(p.fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) continue;
      std::int32_t rank = -1;
      std::string secret(me_.secret().size(), '\0');
      // Only a member of this ring knows the secret; anything else is dropped.
      if (!read_exact(fd, &rank, sizeof rank) || !read_exact(fd, secret.data(), secret.size()) || secret != me_.secret() ||
          rank < 0 || rank >= me_.rank() || links_.count(rank)) {
        ::close(fd);
        continue;
      }
      if (p.fd == tcp_listener_) {
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      }
      links_[rank] = fd;
    }
  }
  return links_[peer];
}

void member_mesh::exchange(int to, const void* out, std::size_t out_bytes, int from, void* in, std::size_t in_bytes,
                           const char* during) {
  int out_fd = to >= 0 && out_bytes ? link(to) : -1;
  int in_fd = from >= 0 && in_bytes ? link(from) : -1;
  auto* o = static_cast<const char*>(out);
  auto* i = static_cast<char*>(in);
  std::size_t sent = 0, got = 0;
  if (out_fd < 0) out_bytes = 0;
  if (in_fd < 0) in_bytes = 0;
  while (sent < out_bytes || got < in_bytes) {
    pollfd pf[2];
    int n = 0;
    if (out_fd >= 0 && sent < out_bytes) pf[n++] = {out_fd, POLLOUT, 0};
    if (in_fd >= 0 && got < in_bytes) {
      if (n == 1 && pf[0].fd == in_fd)
        pf[0].events |= POLLIN;
      else
        pf[n++] = {in_fd, POLLIN, 0};
    }
    int r = ::poll(pf, static_cast<nfds_t>(n), stall_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) lost(got < in_bytes ? from : to, std::string("no progress for 60 s during ") + during);
    for (int k = 0; k < n; ++k) {
      if ((pf[k].revents & (POLLOUT | POLLERR | POLLHUP)) && pf[k].fd == out_fd && sent < out_bytes) {
        auto w = ::send(out_fd, o + sent, out_bytes - sent, MSG_NOSIGNAL);
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
          lost(to, std::string("its link broke during ") + during + " (" + std::strerror(errno) + ")");
        if (w > 0) sent += static_cast<std::size_t>(w);
      }
      if ((pf[k].revents & (POLLIN | POLLERR | POLLHUP)) && pf[k].fd == in_fd && got < in_bytes) {
        auto rd = ::recv(in_fd, i + got, in_bytes - got, 0);
        if (rd == 0) lost(from, std::string("closed its link during ") + during + " (it ended)");
        if (rd < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
          lost(from, std::string("its link broke during ") + during + " (" + std::strerror(errno) + ")");
        if (rd > 0) got += static_cast<std::size_t>(rd);
      }
    }
  }
}

member_mesh& mesh_of(const ring_member& me) {
  // One thread at a time uses a ring's mesh (collective_thread keeps them in order), but two
  // rings may be used from two threads.
  static std::mutex m;
  static auto* meshes = new std::unordered_map<std::uint64_t, std::unique_ptr<member_mesh>>;
  std::unique_lock lock(m);
  auto& mesh = (*meshes)[me.ring_id()];
  if (mesh) return *mesh;
  lock.unlock();  // making it waits for the peers' addresses in the store
  auto made = std::make_unique<member_mesh>(me);
  lock.lock();
  auto& slot = (*meshes)[me.ring_id()];
  if (!slot) slot = std::move(made);
  return *slot;
}

}  // namespace fiber::detail
