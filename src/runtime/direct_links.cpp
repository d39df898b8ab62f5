#include "runtime/direct_links.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <asio/steady_timer.hpp>
#include <limits>

#include "core/log.hpp"
#include "core/same_secret.hpp"
#include "fiber/error.hpp"

namespace fiber::detail {

namespace {
// A child's first message: this, its routing id, the job's password.
constexpr std::string_view link_greeting = "fiber direct link 1";
// Enough for the greeting of any routing id and password.
constexpr std::size_t greeting_limit = 1024;

asio::local::stream_protocol::endpoint abstract(std::string_view name) {
  return asio::local::stream_protocol::endpoint(std::string(1, '\0') + std::string(name));
}
}  // namespace

direct_listener::direct_listener(asio::io_context& io, std::string password, std::size_t max_message_bytes,
                                 std::chrono::milliseconds greeting_timeout,
                                 std::function<bool(const std::string&)> expected,
                                 unique_function<void(const std::string&, multipart&&)> on_message)
    : acceptor_(io),
      password_(std::move(password)),
      max_message_bytes_(max_message_bytes),
      greeting_timeout_(greeting_timeout),
      expected_(std::move(expected)),
      on_message_(std::move(on_message)) {}

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

void direct_listener::accept_next() {
  acceptor_.async_accept([weak = weak_from_this()](std::error_code ec, asio::local::stream_protocol::socket s) {
    auto self = weak.lock();
    if (!self || self->closed_ || ec == asio::error::operation_aborted) return;
    if (!ec) self->on_connection(std::move(s));
    self->accept_next();
  });
}

void direct_listener::on_connection(asio::local::stream_protocol::socket s) {
  // Another user's process is never one of ours, whatever it knows.
  ucred peer{};
  socklen_t len = sizeof peer;
  if (::getsockopt(s.native_handle(), SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 || peer.uid != ::geteuid()) {
    logf(log_level::warn, "a process of another user (uid ", peer.uid, ") connected to the master's unix socket; closed");
    return;
  }
  std::erase_if(unproven_, [](auto& w) { return w.expired(); });
  if (unproven_.size() >= max_unproven) {
    logf(log_level::warn, "more than ", max_unproven, " connections wait to prove themselves on the master's unix socket; ",
         "closing a new one");
    return;
  }
  auto link = std::make_shared<stream_link>(std::move(s), greeting_limit);
  std::weak_ptr<stream_link> weak_link = link;
  // Until it proves itself, the listener holds the link only weakly: its pending read keeps it.
  struct greeting {
    std::string id;  // once proven
    asio::steady_timer deadline;
  };
  auto state = std::make_shared<greeting>(greeting{{}, asio::steady_timer(acceptor_.get_executor(), greeting_timeout_)});
  state->deadline.async_wait([weak_link, state = std::weak_ptr<greeting>(state)](std::error_code ec) {
    auto l = weak_link.lock();
    auto st = state.lock();
    if (ec || !l || !st || !st->id.empty()) return;
    logf(log_level::warn, "a connection to the master's unix socket did not prove itself in time; closed");
    l->close();
  });
  link->start(
      [weak = weak_from_this(), weak_link, state](multipart m) {
        auto self = weak.lock();
        auto l = weak_link.lock();
        if (!self || !l || self->closed_) return;
        if (state->id.empty()) {
          state->deadline.cancel();
          state->id = self->on_first_message(l, std::move(m));
          return;
        }
        self->on_message_(state->id, std::move(m));
      },
      [weak = weak_from_this(), weak_link, state](std::error_code) {
        state->deadline.cancel();
        auto self = weak.lock();
        if (!self || state->id.empty()) return;
        // The child's death itself is seen through its process; here only its link goes.
        auto it = self->links_.find(state->id);
        if (it != self->links_.end() && it->second == weak_link.lock()) self->links_.erase(it);
      });
  unproven_.push_back(link);
}

std::string direct_listener::on_first_message(const std::shared_ptr<stream_link>& link, multipart&& m) {
  std::erase_if(unproven_, [&](auto& w) { return w.expired() || w.lock() == link; });
  bool greeting = m.size() == 3 && m[0].to_string_view() == link_greeting;
  std::string id = greeting ? m[1].to_string() : std::string();
  if (!greeting || !same_secret(m[2].to_string_view(), password_)) {
    logf(log_level::error, "a process that does not know the job's secret connected to the master's unix socket; closed");
    link->close();
    return {};
  }
  if (!expected_(id) || links_.contains(id)) {
    logf(log_level::error, "a process connected to the master's unix socket as child ", id,
         ", which is not a child waiting to connect; closed");
    link->close();
    return {};
  }
  link->set_max_message_bytes(max_message_bytes_);
  links_.emplace(id, link);
  return id;
}

std::error_code direct_listener::send(const std::string& id, multipart&& parts) {
  auto it = links_.find(id);
  if (it == links_.end()) return std::make_error_code(std::errc::host_unreachable);
  return it->second->send(std::move(parts));
}

void direct_listener::close() {
  if (closed_) return;
  closed_ = true;
  std::error_code ignored;
  acceptor_.close(ignored);
  for (auto& [id, link] : links_) link->close();
  links_.clear();
  for (auto& w : unproven_)
    if (auto l = w.lock()) l->close();
  unproven_.clear();
}

std::shared_ptr<stream_link> connect_direct_link(asio::io_context& io, const std::string& endpoint, const std::string& id,
                                                 const std::string& password) {
  asio::local::stream_protocol::socket s(io);
  s.connect(abstract(std::string_view(endpoint).substr(direct_scheme.size())));
  // The master is the only peer, proven by where it listens (it bound the name before starting
  // this child): what it sends is not limited here, as over ZeroMQ.
  auto link = std::make_shared<stream_link>(std::move(s), std::numeric_limits<std::size_t>::max());
  multipart greeting;
  greeting.emplace_back(link_greeting.data(), link_greeting.size());
  greeting.emplace_back(id.data(), id.size());
  greeting.emplace_back(password.data(), password.size());
  if (auto ec = link->send_blocking(greeting)) throw std::system_error(ec, "greeting the master over its unix socket");
  return link;
}

}  // namespace fiber::detail
