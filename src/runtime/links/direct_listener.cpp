#include "runtime/links/direct_listener.hpp"

#include <sys/ioctl.h>
#include <sys/resource.h>

#include <algorithm>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <asio/connect.hpp>
#include <thread>

#include <asio/steady_timer.hpp>
#include <limits>

#include "core/log.hpp"
#include "core/same_secret.hpp"
#include "fiber/error.hpp"
#include "runtime/links/direct_wire.hpp"
#include "runtime/links/lane_handshake.hpp"
#include "runtime/hubs/hub_wire.hpp"

namespace fiber::detail {



direct_listener::direct_listener(asio::io_context& io, std::string password, std::size_t max_message_bytes,
                                 std::chrono::milliseconds greeting_timeout,
                                 std::function<bool(const std::string&)> expected,
                                 unique_function<void(const std::string&, multipart&&)> on_message)
    : io_(io),
      acceptor_(io),
      tcp_acceptor_(io),
      sweep_timer_(io),
      password_(std::move(password)),
      max_message_bytes_(max_message_bytes),
      greeting_timeout_(greeting_timeout),
      expected_(std::move(expected)),
      on_message_(std::move(on_message)) {}

// A connection until it has proven itself: the socket during a TLS handshake, then the link
// while its greeting comes; closed when the deadline passes first.
struct direct_listener::pending {
  pending(stream_link::socket_type s, std::chrono::milliseconds limit)
      : socket(std::move(s)), deadline(socket.get_executor(), limit) {}
  stream_link::socket_type socket;
  asio::steady_timer deadline;
  std::unique_ptr<tls_session> tls;
  std::weak_ptr<stream_link> link;
  std::string id;  // once proven
  link_role role = link_role::child;
  bool shared = false;    // its link went to shared memory (one of lanes_in_use_)
  bool extended = false;  // its bytes were there when its time was up: one more period
  void close() {
    std::error_code ignored;
    socket.close(ignored);
    if (auto l = link.lock()) l->close();
  }
};

void direct_listener::listen(const std::string& name) {
  try {
    acceptor_.open();
    acceptor_.bind(abstract(name));
    acceptor_.listen(asio::socket_base::max_listen_connections);
  } catch (const std::system_error& e) {
    throw error(errc::spawn_failed, "cannot listen on the unix socket @" + name + ": " + e.what());
  }
  endpoint_ = std::string(direct_scheme) + name;
  accept_next();
}

std::string direct_listener::listen_tcp(const std::string& host, const tls_session::key& psk,
                                        std::chrono::milliseconds check_every, std::chrono::milliseconds silence) {
  asio::ip::tcp::endpoint at;
  try {
    std::error_code ec;
    auto address = asio::ip::make_address(host, ec);
    if (ec) {  // a name: its first address
      asio::ip::tcp::resolver resolver(tcp_acceptor_.get_executor());
      at = *resolver.resolve(host, "0").begin();
    } else {
      at = asio::ip::tcp::endpoint(address, 0);
    }
    tcp_acceptor_.open(at.protocol());
    tcp_acceptor_.set_option(asio::socket_base::reuse_address(true));
    tcp_acceptor_.bind(at);
    tcp_acceptor_.listen(asio::socket_base::max_listen_connections);
  } catch (const std::system_error& e) {
    throw error(errc::spawn_failed, "cannot listen on TCP at " + host + ": " + e.what());
  }
  psk_ = psk;
  accept_tcp();
  close_silent(check_every, silence);
  return "tcp://" + host + ":" + std::to_string(tcp_acceptor_.local_endpoint().port());
}

void direct_listener::accept_next() {
  acceptor_.async_accept([weak = weak_from_this()](std::error_code ec, asio::local::stream_protocol::socket s) {
    auto self = weak.lock();
    if (!self || self->closed_ || ec == asio::error::operation_aborted) return;
    if (!ec) {
      // Another user's process is never one of ours, whatever it knows.
      ucred peer{};
      socklen_t len = sizeof peer;
      if (::getsockopt(s.native_handle(), SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 || peer.uid != ::geteuid()) {
        logf(log_level::warn, "a process of another user (uid ", peer.uid, ") connected to the master's unix socket; closed");
      } else {
        auto executor = s.get_executor();
        stream_link::socket_type g(executor, asio::generic::stream_protocol(AF_UNIX, SOCK_STREAM), s.release());
        if (auto p = self->admit(std::move(g))) self->start_link(p);
      }
    }
    self->accept_next();
  });
}

void direct_listener::accept_tcp() {
  tcp_acceptor_.async_accept([weak = weak_from_this()](std::error_code ec, asio::ip::tcp::socket s) {
    auto self = weak.lock();
    if (!self || self->closed_ || ec == asio::error::operation_aborted) return;
    if (!ec) {
      std::error_code ignored;
      s.set_option(asio::ip::tcp::no_delay(true), ignored);
      tune_tcp(s.native_handle(), self->silence_);
      auto family = s.local_endpoint(ignored).protocol().family();
      auto executor = s.get_executor();
      stream_link::socket_type g(executor, asio::generic::stream_protocol(family, SOCK_STREAM), s.release());
      if (auto p = self->admit(std::move(g))) {
        p->tls = std::make_unique<tls_session>(tls_session::role::server, *self->psk_);
        self->handshake(p);
      }
    }
    self->accept_tcp();
  });
}

std::size_t direct_listener::max_unproven() {
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_cur == RLIM_INFINITY) return 1024;
  return std::clamp<std::size_t>(static_cast<std::size_t>(files.rlim_cur) / 4, 16, 1024);
}

namespace {
/// Whether bytes wait on `fd` (a greeting that came while the loop was busy elsewhere).
bool bytes_waiting(int fd) {
  int n = 0;
  return ::ioctl(fd, FIONREAD, &n) == 0 && n > 0;
}
}  // namespace

std::shared_ptr<direct_listener::pending> direct_listener::admit(stream_link::socket_type s) {
  std::erase_if(unproven_, [](auto& w) { return w.expired(); });
  static const std::size_t most = max_unproven();
  if (unproven_.size() >= most) {
    // The oldest goes: a child proves itself within a turn of the loop, so the oldest of a full
    // set is a connection that does not mean to (a flood), not one of ours.
    if (!flood_reported_)
      logf(log_level::warn, most, " connections wait to prove themselves to the master; the oldest are closed for new ones");
    flood_reported_ = true;
    if (auto oldest = unproven_.front().lock()) oldest->close();
    unproven_.erase(unproven_.begin());
  }
  auto limit = std::min<std::chrono::milliseconds>(greeting_timeout_, proof_limit);
  auto p = std::make_shared<pending>(std::move(s), limit);
  // Until it proves itself, the listener holds the connection only weakly: its pending read
  // keeps it.
  arm_deadline(p, limit);
  unproven_.push_back(p);
  return p;
}

void direct_listener::arm_deadline(const std::shared_ptr<pending>& p, std::chrono::milliseconds limit) {
  p->deadline.expires_after(limit);
  p->deadline.async_wait([weak = std::weak_ptr<pending>(p), limit, self = weak_from_this()](std::error_code ec) {
    auto waiting = weak.lock();
    if (ec || !waiting || !waiting->id.empty()) return;
    // What arrived counts first: a master that was busy elsewhere does not drop a child whose
    // greeting is already here.
    if (!waiting->extended && bytes_waiting(waiting->socket.native_handle())) {
      waiting->extended = true;
      if (auto l = self.lock()) l->arm_deadline(waiting, limit);
      return;
    }
    logf(log_level::debug, "a connection to the master did not prove itself in time; closed");
    waiting->close();
  });
}

void direct_listener::handshake(const std::shared_ptr<pending>& p) {
  auto step = p->tls->handshake();
  std::string out;
  p->tls->take_output(out);
  // The handshake's few hundred bytes always fit the new socket's buffer.
  if (!out.empty() && ::send(p->socket.native_handle(), out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT) !=
                          static_cast<ssize_t>(out.size()))
    step = tls_session::step::failed;
  if (step == tls_session::step::failed) {
    logf(log_level::warn, "a connection to the master failed its TLS handshake: ",
         p->tls->failure().empty() ? std::string("it could not be written to") : p->tls->failure(), "; closed");
    p->deadline.cancel();
    p->close();
    return;
  }
  if (step == tls_session::step::done) return start_link(p);
  p->socket.async_wait(asio::socket_base::wait_read, [weak = weak_from_this(), p](std::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || self->closed_ || !p->socket.is_open()) return;
    char buf[4096];
    auto n = ::recv(p->socket.native_handle(), buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      p->deadline.cancel();
      p->close();
      return;
    }
    if (n > 0) p->tls->feed(buf, static_cast<std::size_t>(n));
    self->handshake(p);
  });
}

void direct_listener::start_link(const std::shared_ptr<pending>& p) {
  auto link = std::make_shared<stream_link>(std::move(p->socket), greeting_limit, std::move(p->tls));
  if (silence_.count() > 0) link->reader().track_heard();  // swept: its silence counts
  p->link = link;
  std::weak_ptr<stream_link> weak_link = link;
  link->start(
      [weak = weak_from_this(), weak_link, p](multipart m) {
        auto self = weak.lock();
        auto l = weak_link.lock();
        if (!self || !l || self->closed_) return;
        if (p->id.empty()) {
          p->deadline.cancel();
          p->id = self->on_first_message(l, std::move(m), *p);
          if (!p->id.empty() && p->role == link_role::child && self->joined_) self->joined_(p->id);
          if (!p->id.empty() && p->role == link_role::hub && self->hub_watch_.linked) self->hub_watch_.linked(p->id);
          return;
        }
        if (p->role == link_role::hub) return self->on_hub_message(p->id, l, std::move(m));
        self->on_message_(p->id, std::move(m));
      },
      [weak = weak_from_this(), weak_link, p](std::error_code) {
        p->deadline.cancel();
        auto self = weak.lock();
        if (!self || p->id.empty()) return;
        self->link_closed(p, weak_link.lock());
      });
}

void direct_listener::link_closed(const std::shared_ptr<pending>& p, const std::shared_ptr<stream_link>& link) {
  if (p->shared) {
    p->shared = false;
    --lanes_in_use_;
  }
  // The child's death itself is seen through its process; here only its link goes.
  auto it = links_.find(p->id);
  bool current = it != links_.end() && it->second == link;  // not replaced, nor closed by the sweep
  if (current) links_.erase(it);
  if (p->role == link_role::hub) {
    std::size_t n = std::erase_if(routes_, [&](auto& r) { return r.second == link; });
    if (n > 0)
      logf(log_level::warn, "host hub ", p->id, "'s link closed; the ", n, " children linked through it are unreachable");
    // Closed here or by the sweep (which took it out of links_ first).
    if (!links_.contains(p->id) && hub_watch_.unlinked) hub_watch_.unlinked(p->id);
  } else if (current && left_) {
    left_(p->id);
  }
}

void direct_listener::on_hub_message(const std::string& hub, const std::shared_ptr<stream_link>& link, multipart&& m) {
  auto relay = m.empty() ? std::nullopt : hub_wire::parse(m[0]);
  if (!relay) {
    logf(log_level::error, "host hub ", hub, " sent a message without a relay frame; its link is closed");
    return link->close();
  }
  std::string id(relay->second);
  auto route = routes_.find(id);
  bool routed_here = route != routes_.end() && route->second == link;
  switch (relay->first) {
    case hub_wire::op::joined:
      if (routed_here) return;
      if (route != routes_.end() || links_.contains(id) || !expected_(id)) {
        logf(log_level::error, "host hub ", hub, " linked child ", id, ", which is not a child waiting to connect; refused");
        multipart no;
        no.push_back(hub_wire::frame(hub_wire::op::refused, id));
        (void)link->send(std::move(no));
        return;
      }
      routes_.emplace(id, link);
      return;
    case hub_wire::op::left:
      if (!routed_here) return;
      routes_.erase(route);
      if (left_) left_(id);
      return;
    case hub_wire::op::message:
      if (!routed_here) return;  // refused, or left: what it still sent is not its master's
      m.erase(m.begin());
      on_message_(id, std::move(m));
      return;
    case hub_wire::op::pulse: return;  // the hub is alive: its link's last_heard() says so
    case hub_wire::op::news:
      m.erase(m.begin());
      if (hub_watch_.news) hub_watch_.news(hub, id, std::move(m));
      return;
    case hub_wire::op::refused:
    case hub_wire::op::start:
    case hub_wire::op::signal: return;  // not a hub's to say
  }
}

void direct_listener::drop(const std::string& id) {
  auto it = links_.find(id);
  if (it != links_.end()) it->second->close();  // its reader reports the close
}

void direct_listener::close_silent(std::chrono::milliseconds check_every, std::chrono::milliseconds silence) {
  check_every_ = check_every;
  silence_ = silence;
  sweep();
}

// A child across a network that stopped (SIGSTOP, a frozen VM) keeps its TCP connection: its
// kernel still answers; so does one behind a host hub, whose hub sweeps its links the same way. Its pulses stop, and its link is closed here, so sends to it fail and the
// pool ends it as lost, as ZeroMQ's heartbeats did. One timer for every link, not one each. A
// link whose bytes wait unread is not silent: this loop was busy (starting a thousand children),
// not the child.
void direct_listener::sweep() {
  sweep_timer_.expires_after(check_every_);
  sweep_timer_.async_wait([weak = weak_from_this()](std::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || self->closed_) return;
    auto now = stream_link::clock::now();
    std::vector<std::string> silent;
    for (auto& [id, link] : self->links_)
      if (now - link->reader().last_heard() >= self->silence_ && !link->bytes_waiting())
        silent.push_back(id);
    for (auto& id : silent) {
      logf(log_level::warn, "child ", id, " has said nothing for heartbeat_timeout_ms (", self->silence_.count(),
           " ms); its link is closed");
      auto it = self->links_.find(id);
      auto link = it->second;
      self->links_.erase(it);  // sends to it fail from now on
      if (self->left_) self->left_(id);
      link->close();
    }
    self->sweep();
  });
}

std::string direct_listener::on_first_message(const std::shared_ptr<stream_link>& link, multipart&& m, pending& p) {
  std::erase_if(unproven_, [&](auto& w) {
    auto waiting = w.lock();
    return !waiting || waiting->link.lock() == link;
  });
  // Shared memory is for a child on this host: over TLS that greeting is not one.
  bool asks_shared = m.size() == 3 && m[0].to_string_view() == link_greeting_shared && !link->encrypted();
  bool greeting = m.size() == 3 && (m[0].to_string_view() == link_greeting || asks_shared);
  // A hub is reached over TLS only: on this host its children would link directly.
  bool hub = m.size() == 3 && m[0].to_string_view() == hub_greeting && link->encrypted();
  std::string id = greeting || hub ? m[1].to_string() : std::string();
  // Over TLS the handshake proved the key; the greeting carries no password.
  if (!(greeting || hub) || !same_secret(m[2].to_string_view(), link->encrypted() ? std::string_view() : password_)) {
    logf(log_level::error, "a process that does not know the job's secret connected to the master's unix socket; closed");
    link->close();
    return {};
  }
  if (hub) {
    if (!expected_hub_ || !expected_hub_(id) || links_.contains(id)) {
      logf(log_level::error, "a process connected to the master as host hub ", id, ", which it did not start; closed");
      link->close();
      return {};
    }
    p.role = link_role::hub;
    link->set_coalescing(true);  // what one turn sends to a host goes in one write
  } else if (!expected_(id) || links_.contains(id) || routes_.contains(id)) {
    logf(log_level::error, "a process connected to the master's unix socket as child ", id,
         ", which is not a child waiting to connect; closed");
    link->close();
    return {};
  }
  if (asks_shared) {
    // The child sends nothing more until it has this answer: from here each side's bytes go
    // through the lane, if there is one.
    if (!answer_lane(*link, io_, lanes_in_use_ < lanes_most_)) {
      logf(log_level::warn, "the answer to child ", id, "'s greeting could not be written; its link is closed");
      link->close();
      return {};
    }
    if (link->shared()) {
      p.shared = true;
      ++lanes_in_use_;
    }
  }
  link->reader().set_max_message_bytes(max_message_bytes_);
  links_.emplace(id, link);
  return id;
}

std::error_code direct_listener::send(const std::string& id, multipart&& parts) {
  auto it = links_.find(id);
  if (it != links_.end()) return it->second->send(std::move(parts));
  auto route = routes_.find(id);
  if (route == routes_.end()) return std::make_error_code(std::errc::host_unreachable);
  parts.insert(parts.begin(), hub_wire::frame(hub_wire::op::message, id));
  auto ec = route->second->send(std::move(parts));
  // A send that fails leaves its parts as they were (the move is the contract's, as zmq's send).
  if (ec) parts.erase(parts.begin());  // NOLINT(bugprone-use-after-move)
  return ec;
}

void direct_listener::close() {
  if (closed_) return;
  closed_ = true;
  std::error_code ignored;
  acceptor_.close(ignored);
  tcp_acceptor_.close(ignored);
  sweep_timer_.cancel();
  for (auto& [id, link] : links_) link->close();
  links_.clear();
  routes_.clear();
  for (auto& w : unproven_)
    if (auto p = w.lock()) p->close();
  unproven_.clear();
}

}  // namespace fiber::detail
