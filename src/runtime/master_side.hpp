// The master's side of the runtime: the socket its children connect to (with the job's ZAP
// handler), its children's handshakes and ends, the queue broker, the backend, and the routing
// of service messages to the services that own them.
#pragma once
#include <asio/io_context.hpp>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend/backend.hpp"
#include "core/flight_recorder.hpp"
#include "fiber/config.hpp"
#include "runtime/channels/channel_broker.hpp"
#include "runtime/channels/channel_route.hpp"
#include "runtime/links/direct_links.hpp"
#include "runtime/hubs/host_hubs.hpp"
#include "runtime/hubs/hub_forks.hpp"
#include "runtime/links/socket_options.hpp"
#include "runtime/trust/job_security.hpp"
#include "runtime/channels/pending_gets.hpp"
#include "runtime/services/service_registry.hpp"
#include "transport/zmq_channel.hpp"

namespace fiber::detail {
class worker_side;

/// What a master needs from a child it started (implemented by child_process).
class child_endpoint {
 public:
  virtual ~child_endpoint() = default;
  virtual void on_hello(const std::string& hello_json) = 0;
  virtual void on_done(bool raised, const std::string& detail) = 0;
  /// The master is shutting down: kill, reap, and complete whoever waits.
  virtual void on_master_shutdown() noexcept = 0;
};

class master_side final : public channel_route, public std::enable_shared_from_this<master_side> {
 public:
  /// Everything referred to outlives this (the runtime owns them all).
  master_side(asio::io_context& io, zmq::context_t& zctx, const fiber::config& cfg, const std::string& job_id,
              const job_keys& keys, pending_gets& gets, service_registry& services);

  /// Binds the listening socket on first use; returns the endpoint children connect to.
  const std::string& listen();
  std::vector<std::string> endpoints() const;
  /// Whether ZeroMQ heartbeats watch the children (they reach this master over a network); on
  /// this host's unix sockets they do not, and a stopped child is found by its state instead.
  bool heartbeats() const noexcept { return remote_links_ || (!direct_ && !endpoint_.starts_with("ipc://")); }
  /// Whether the children run on this host, in its process namespace (they reach this master on
  /// a unix socket): they can map memory this process shares (valid after listen()).
  bool children_on_this_host() const noexcept {
    return (direct_ && !remote_links_) || endpoint_.starts_with("ipc://");
  }
  backend& the_backend();
  /// A backend other than config `backend`'s own (a nested master on a cluster backend: the one
  /// that asks the top master); before the first use of the_backend().
  void use_backend(std::unique_ptr<backend> b) { backend_ = std::move(b); }
  asio::io_context& io() noexcept { return io_; }
  /// The top master: what takes its nested masters' events of their children (runtime::record_child_event).
  using record_fn = unique_function<void(record_kind, std::string_view name, std::uint64_t c, std::uint64_t d,
                                         std::string_view text)>;
  void record_with(record_fn f) noexcept { record_ = std::move(f); }
  /// ... and what takes their own recorders' batches (runtime::take_record_batch).
  using records_fn = unique_function<void(std::uint64_t sender, std::uint64_t now, std::string_view tree,
                                          std::string_view records)>;
  void take_records_with(records_fn f) noexcept { take_records_ = std::move(f); }
  /// ... and their pools' states for the dashboard (kind::pool_view).
  using pool_view_fn = unique_function<void(std::uint64_t pool, std::string_view tree, std::string_view state, bool ended)>;
  void take_pool_views_with(pool_view_fn f) noexcept { take_pool_views_ = std::move(f); }
  /// remote_transport=hub: the unix name of the host hub each child links to on its host (valid
  /// after listen()); empty when children link to this master directly.
  std::string hub_name() const { return hubs_ ? hubs_->name() : std::string(); }
  /// Credentials for a child (valid after listen()).
  std::string worker_credentials() const { return keys_.for_worker(plain_auth_); }

  void attach_child(const std::string& routing_id, std::weak_ptr<child_endpoint> child);
  void detach_child(const std::string& routing_id);
  void send_to_child(const std::string& routing_id, multipart&& parts);
  /// As send_to_child, but tells: an error means the child's connection is gone, and `parts`
  /// is left as it was.
  std::error_code try_send_to_child(const std::string& routing_id, multipart&& parts);
  /// Children still running, and what to do with them when the master goes. Held weakly: a
  /// child's object may go before its process is reaped (a manager dropped on a caller's loop
  /// asks its server to stop and lets go), and its job, whose end kills and reaps, goes with it.
  void track_job(const std::shared_ptr<job>& j) {
    std::erase_if(live_jobs_, [](const std::weak_ptr<job>& w) { return w.expired(); });
    live_jobs_.push_back(j);
  }
  void untrack_job(const job* j) {
    std::erase_if(live_jobs_, [j](const std::weak_ptr<job>& w) {
      auto held = w.lock();
      return !held || held.get() == j;
    });
  }
  std::vector<int> live_pids() const;

  /// A child's master that is itself a child (nested): the queues and pipes of the whole tree are
  /// served by the top master, so its children's puts and gets go up through `upstream` (its own
  /// route), and the answers come back down (docs/design.md, "Nested processes").
  void forward_channels_to(worker_side* upstream);
  /// Nested: a reply from above to a call this master passed up for a child (a manager's proxy
  /// passed down more than one level); true when it was one, and it went down.
  bool pass_reply_down(const header& h, multipart& payload);
  /// A routing id for a new child, unique in this process; in the top master also the child's
  /// channel prefix, which the top master hands out to the whole tree (channel 0, below).
  static std::uint32_t new_peer();
  /// The reserved channel a nested master reads a channel prefix for its new child from: a get
  /// on it, answered by the top master with four bytes.
  static constexpr std::uint64_t prefix_channel = 0;

  /// Nested: child `routing_id`'s channel prefix (its queues and pipes end with it).
  void note_prefix(const std::string& routing_id, std::uint32_t prefix) { prefixes_[routing_id] = prefix; }

  // channel_route: the broker is here
  void put(std::uint64_t channel, multipart&& payload) override;
  void get(std::uint64_t channel, std::uint64_t request) override;
  void maker_gone(std::uint32_t prefix) override;
  void cancel_get(std::uint64_t channel, std::uint64_t request) override;
  void release(std::uint64_t channel) noexcept override { broker_.release(channel); }
  void shutdown() noexcept override;

 private:
  /// direct_: children's links, on this host or over TLS, routed to handle().
  void make_listener();
  void listen_direct();
  /// remote_transport=direct: children on other hosts reach this master over TCP with TLS.
  void listen_tls(const std::string& endpoint);
  /// remote_transport=hub: ... through a hub on each host the backend can start one on.
  void start_hubs();
  void receive_next();
  /// A message from child `peer`; its header is m[first].
  void handle(const std::string& peer, multipart&& m, std::size_t first);
  bool deliver(const channel_reader& r, std::uint64_t channel, multipart& payload, bool may_run_inline);
  /// Nested: a child's get, asked upstream under a request of this process; the answer goes down.
  void forward_get(const std::string& peer, std::uint64_t channel, std::uint64_t request);
  /// Whether the process that made `channel` has ended (the top master keeps the list).
  bool maker_has_gone(std::uint64_t channel) const noexcept {
    return !gone_makers_.empty() && gone_makers_.contains(static_cast<std::uint32_t>(channel >> 32));
  }
  /// Answers `reader` that `channel`'s maker has ended.
  void fail_read(const channel_reader& reader, std::uint64_t channel);

  asio::io_context& io_;
  zmq::context_t& zctx_;
  const fiber::config& cfg_;
  const std::string& job_id_;
  const job_keys& keys_;
  pending_gets& gets_;
  service_registry& services_;
  channel_broker broker_;
  std::shared_ptr<zmq_channel> router_;
  std::shared_ptr<zap_handler> zap_;
  std::shared_ptr<direct_listener> direct_;  // children on this host, or over TLS, without ZeroMQ
  bool remote_links_ = false;                // direct_ listens on TCP (children on other hosts)
  std::string endpoint_;
  bool plain_auth_ = false;  // listening on a local unix socket with encryption=auto (password, no CURVE)
  std::unique_ptr<backend> backend_;
  std::unique_ptr<host_hubs> hubs_;  // after backend_: its hubs are the backend's jobs
  std::shared_ptr<hub_forks> forks_;  // hub_workers=fork: the backend children are started with
  std::unordered_map<std::string, std::weak_ptr<child_endpoint>> children_;
  std::vector<std::weak_ptr<job>> live_jobs_;
  worker_side* upstream_ = nullptr;  // nested: the master above, where the tree's channels are served
  record_fn record_;
  records_fn take_records_;  // the top master's: its recorder and dashboard
  pool_view_fn take_pool_views_;
  // nested: calls to services above passed up for a child: our request -> (child, its request)
  std::map<std::uint64_t, std::pair<std::string, std::uint64_t>> passed_calls_;
  std::uint64_t next_passed_call_ = 0;
  // nested: (child, its request) -> (channel, our request)
  std::map<std::pair<std::string, std::uint64_t>, std::pair<std::uint64_t, std::uint64_t>> forwarded_;
  // The top master: the channel prefixes of processes that have ended, and of each prefix handed
  // out to a nested master's child, the child of this master it came through (its subtree).
  std::unordered_set<std::uint32_t> gone_makers_;
  std::unordered_map<std::uint32_t, std::string> handed_out_;
  std::unordered_map<std::string, std::uint32_t> prefixes_;  // nested: its children's prefixes
  bool closed_ = false;
};

}  // namespace fiber::detail
