// How a master's children reach it and how it reaches them: one listener, chosen by where the
// backend puts the children and by the config. On this host, direct links on an abstract unix
// socket (local_transport=direct) or a ZeroMQ router on an ipc socket; across a network, TLS over
// TCP (remote_transport=direct), TLS through a hub on each host (remote_transport=hub, whose hubs
// may also fork their host's children: hub_workers=fork), or a ZeroMQ router with CURVE and the
// job's ZAP handler (remote_transport=zeromq). Whichever it is, every message from a child comes
// to one function, and send() reaches a child by its routing id.
#pragma once
#include <asio/io_context.hpp>
#include <functional>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "backend/backend.hpp"
#include "fiber/config.hpp"
#include "fiber/detail/unique_function.hpp"
#include "runtime/trust/job_security.hpp"
#include "transport/zmq_context.hpp"
#include "transport/zmq_channel.hpp"

namespace fiber::detail {
class direct_listener;
class host_hubs;
class hub_forks;

class child_links : public std::enable_shared_from_this<child_links> {
 public:
  /// `on_message(peer, m, first)`: a message from child `peer`, its header at m[first]. `expected(id)`:
  /// whether a child with routing id `id` may link now (one this master started and has not let go).
  using message_fn = unique_function<void(const std::string& peer, multipart&& m, std::size_t first)>;
  /// Everything referred to outlives this.
  child_links(asio::io_context& io, zmq_context& zctx, const fiber::config& cfg, const std::string& job_id,
              const job_keys& keys, message_fn on_message, std::function<bool(const std::string&)> expected);
  ~child_links();
  child_links(const child_links&) = delete;
  child_links& operator=(const child_links&) = delete;

  /// Binds on first use, for children that `engine` starts; returns the endpoint they connect
  /// to. Throws fiber::error: closed after close(), config_error for a transport the placement
  /// cannot have, spawn_failed when nothing can be bound.
  const std::string& listen(backend& engine);
  /// The endpoint (empty before listen()).
  const std::string& endpoint() const noexcept { return endpoint_; }
  /// Whether ZeroMQ heartbeats watch the children (they reach this master over a network); on
  /// this host's unix sockets they do not, and a stopped child is found by its state instead.
  bool heartbeats() const noexcept;
  /// Whether the children run on this host, in its process namespace: they can map memory this
  /// process shares (valid after listen()).
  bool children_on_this_host() const noexcept;
  /// remote_transport=hub: the unix name of the host hub each child links to on its host; empty
  /// when children link to this master directly.
  std::string hub_name() const;
  /// A child's credentials: the keys, or on a local unix socket only the password (after listen()).
  std::string worker_credentials() const { return keys_.for_worker(plain_auth_); }
  /// hub_workers=fork: the backend whose children the hubs fork (null otherwise).
  backend* forks() const noexcept;

  /// `left(peer)` when child `peer`'s link closes (direct links and hubs; a ZeroMQ router tells
  /// nothing of it). Before listen().
  void on_child_left(unique_function<void(const std::string& peer)> left) { on_left_ = std::move(left); }

  /// Sends to child `peer`; an error means its connection is gone, and `parts` is left as it was.
  std::error_code send(const std::string& peer, multipart&& parts);
  /// Ends the hubs (and the children they forked), then the listener: no message comes after.
  /// Before the backend that started the hubs goes.
  void close() noexcept;

 private:
  void listen_zeromq(const std::string& endpoint);
  void make_listener();
  void listen_direct();
  void listen_tls(const std::string& endpoint);
  void start_hubs();
  void receive_next();

  asio::io_context& io_;
  zmq_context& zctx_;
  const fiber::config& cfg_;
  const std::string& job_id_;
  const job_keys& keys_;
  message_fn on_message_;
  unique_function<void(const std::string&)> on_left_;
  std::function<bool(const std::string&)> expected_;
  backend* engine_ = nullptr;
  std::shared_ptr<zmq_channel> router_;
  std::shared_ptr<zap_handler> zap_;
  std::shared_ptr<direct_listener> direct_;  // children on this host, or over TLS, without ZeroMQ
  bool remote_links_ = false;                // direct_ listens on TCP (children on other hosts)
  bool plain_auth_ = false;  // a local unix socket with encryption=auto: the password, no CURVE
  std::string endpoint_;
  std::unique_ptr<host_hubs> hubs_;
  std::shared_ptr<hub_forks> forks_;  // hub_workers=fork: the backend children are started with
  bool closed_ = false;
};

}  // namespace fiber::detail
