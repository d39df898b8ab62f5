#include "runtime/links/child_links.hpp"

#include <unistd.h>

#include "core/log.hpp"
#include "fiber/error.hpp"
#include "runtime/hubs/host_hubs.hpp"
#include "runtime/hubs/hub_forks.hpp"
#include "runtime/links/direct_listener.hpp"
#include "runtime/links/socket_options.hpp"

namespace fiber::detail {

child_links::child_links(asio::io_context& io, zmq_context& zctx, const fiber::config& cfg, const std::string& job_id,
                         const job_keys& keys, message_fn on_message, std::function<bool(const std::string&)> expected)
    : io_(io),
      zctx_(zctx),
      cfg_(cfg),
      job_id_(job_id),
      keys_(keys),
      on_message_(std::move(on_message)),
      expected_(std::move(expected)) {}

child_links::~child_links() { close(); }

const std::string& child_links::listen(backend& engine) {
  if (router_ || direct_) return endpoint_;
  if (closed_) throw error(errc::closed, "the fiber context has shut down");
  engine_ = &engine;
  auto endpoint = engine.listen_endpoint(job_id_);
  if (endpoint.starts_with("ipc://") && cfg_.local_transport == "direct" && cfg_.encryption == "auto") {
    listen_direct();
    return endpoint_;
  }
  if (cfg_.hub_workers == "fork" && cfg_.remote_transport != "hub" && endpoint.starts_with("tcp://"))
    throw error(errc::config_error, "hub_workers=fork has the host hubs start the children, and remote_transport is " +
                                        cfg_.remote_transport + ": set remote_transport=hub, or hub_workers=engine");
  if (endpoint.starts_with("tcp://") && cfg_.remote_transport != "zeromq") {
    listen_tls(endpoint);
    if (cfg_.remote_transport == "hub") start_hubs();
    return endpoint_;
  }
  listen_zeromq(endpoint);
  return endpoint_;
}

void child_links::listen_zeromq(const std::string& endpoint) {
  zmq::socket_t s(zctx_.get(), zmq::socket_type::router);
  // Children on this host (a unix socket) are watched through their pidfd, and a stopped one by
  // the state the kernel reports (the pool's probe): heartbeats would only wake every child
  // every interval. Across a network they are how a silent peer is found out.
  configure_socket(s, cfg_, /*heartbeats=*/!endpoint.starts_with("ipc://"));
  s.set(zmq::sockopt::router_mandatory, 1);
  plain_auth_ = endpoint.starts_with("ipc://") && cfg_.encryption == "auto";
  zap_ = std::make_shared<zap_handler>(io_, zctx_.get(), keys_, plain_auth_);
  zap_->start();
  secure_as_server(s, keys_, plain_auth_);
  // A peer that has not finished ZeroMQ's handshake (CURVE or PLAIN, then ZAP) in 10 s is dropped,
  // not after ZeroMQ's default of 30: a stranger's connection costs a descriptor for seconds.
  s.set(zmq::sockopt::handshake_ivl, 10000);
  try {
    s.bind(endpoint);
  } catch (const zmq::error_t& e) {
    throw error(errc::spawn_failed, "cannot listen on " + endpoint + ": " + e.what());
  }
  endpoint_ = engine_->advertised(s.get(zmq::sockopt::last_endpoint));
  router_ = std::make_shared<zmq_channel>(io_, std::move(s));
  router_->limit_joined_messages(cfg_.max_message_bytes + 4096);
  logf(log_level::debug, "listening on ", endpoint_);
  receive_next();
}

void child_links::make_listener() {
  direct_ = std::make_shared<direct_listener>(
      io_, keys_.password, cfg_.max_message_bytes + stream_link::envelope_bytes,
      std::chrono::milliseconds(cfg_.start_timeout_ms),  // a child greets long before its handshake is due
      [this](const std::string& id) { return expected_(id); },
      [weak = weak_from_this()](const std::string& peer, multipart&& m) {
        auto self = weak.lock();
        if (self && !self->closed_) self->on_message_(peer, std::move(m), 0);
      });
  direct_->watch_children({}, [weak = weak_from_this()](const std::string& peer) {
    auto self = weak.lock();
    if (self && !self->closed_ && self->on_left_) self->on_left_(peer);
  });
}

void child_links::listen_direct() {
  make_listener();
  direct_->offer_lanes(static_cast<std::size_t>(cfg_.shared_links));
  direct_->listen("fiber-" + job_id_ + "-" + std::to_string(::getpid()));
  endpoint_ = direct_->endpoint();
  plain_auth_ = true;  // children prove themselves with the password
  logf(log_level::debug, "listening on ", endpoint_);
}

void child_links::listen_tls(const std::string& endpoint) {
  auto hostport = endpoint.substr(std::string_view("tcp://").size());
  auto host = hostport.substr(0, hostport.rfind(':'));
  make_listener();
  auto bound = direct_->listen_tcp(host, tls_session::key_for(keys_.client_secret),
                                   std::chrono::milliseconds(cfg_.heartbeat_interval_ms),
                                   std::chrono::milliseconds(cfg_.heartbeat_timeout_ms));
  auto advertised = engine_->advertised(bound);
  endpoint_ = std::string(tls_scheme) + advertised.substr(std::string_view("tcp://").size());
  remote_links_ = true;
  logf(log_level::debug, "listening on ", endpoint_);
}

void child_links::start_hubs() {
  auto hosts = engine_->hub_hosts();
  if (hosts.empty()) {
    logf(log_level::info, "remote_transport=hub: the ", engine_->name(),
         " backend cannot start work on a given host; children link to the master directly");
    return;
  }
  hubs_ = std::make_unique<host_hubs>(io_, *engine_, cfg_, job_id_, endpoint_, worker_credentials());
  direct_->accept_hubs([this](const std::string& id) { return hubs_ && hubs_->expected(id); });
  if (cfg_.hub_workers == "fork") {
    forks_ = std::make_shared<hub_forks>(io_, *engine_, direct_, hosts);
    direct_->watch_hubs({.linked = [this](const std::string& hub) {
                           if (forks_ && hubs_) forks_->linked(hubs_->host_of(hub), hub);
                         },
                         .unlinked = [this](const std::string& hub) {
                           if (forks_) forks_->unlinked(hub);
                         },
                         .news = [this](const std::string& hub, const std::string& start, multipart&& parts) {
                           if (forks_) forks_->news(hub, start, std::move(parts));
                         }});
    hubs_->on_given_up([this](const std::string& host, const std::string& why) {
      if (forks_) forks_->given_up(host, why);
    });
  }
  hubs_->start(hosts);
  logf(log_level::debug, "host hubs starting on ", hosts.size(), " host(s)");
}

void child_links::receive_next() {
  router_->async_receive([weak = weak_from_this()](std::error_code ec, multipart m) {
    auto self = weak.lock();
    if (ec || !self || self->closed_) return;
    std::string peer = m.empty() ? std::string() : m[0].to_string();  // the router's envelope
    self->on_message_(peer, std::move(m), 1);
    if (!self->closed_) self->receive_next();
  });
}

bool child_links::heartbeats() const noexcept {
  return remote_links_ || (!direct_ && !endpoint_.starts_with("ipc://"));
}

bool child_links::children_on_this_host() const noexcept {
  return (direct_ && !remote_links_) || endpoint_.starts_with("ipc://");
}

std::string child_links::hub_name() const { return hubs_ ? hubs_->name() : std::string(); }

backend* child_links::forks() const noexcept { return forks_.get(); }

std::error_code child_links::send(const std::string& peer, multipart&& parts) {
  if (direct_) return direct_->send(peer, std::move(parts));
  if (!router_) return make_error_code(errc::closed);
  parts.insert(parts.begin(), zmq::message_t(peer.data(), peer.size()));  // the router's envelope
  auto ec = router_->send(std::move(parts));
  // A send that fails leaves its parts as they were (the move is the contract's, as zmq's send).
  if (ec) parts.erase(parts.begin());  // NOLINT(bugprone-use-after-move)
  return ec;
}

void child_links::close() noexcept {
  if (closed_) return;
  closed_ = true;
  forks_.reset();  // its children were killed with the master's other children
  if (hubs_) hubs_->shutdown();
  hubs_.reset();
  if (router_) router_->close();
  if (direct_) direct_->close();
  if (zap_) zap_->close();
}

}  // namespace fiber::detail
