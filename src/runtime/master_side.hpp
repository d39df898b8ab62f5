// The master's side of the runtime, a router over its parts: how its children reach it
// (runtime/links/child_links), the tree's queues and pipes (runtime/channels/master_channels),
// in a nested master what goes up to its own master (runtime/nested/upward_relay), and what the
// tree reports for the recording and the dashboard (runtime/observe/tree_reports). It keeps the
// children it started and their jobs, and the backend; handle() only dispatches a child's message
// to the part whose kind it is.
#pragma once
#include <asio/io_context.hpp>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.hpp"
#include "fiber/config.hpp"
#include "runtime/channels/master_channels.hpp"
#include "runtime/channels/pending_gets.hpp"
#include "runtime/links/child_links.hpp"
#include "runtime/observe/tree_reports.hpp"
#include "runtime/services/service_registry.hpp"
#include "runtime/trust/job_security.hpp"
#include "transport/zmq_context.hpp"

namespace fiber::detail {
class upward_relay;
class worker_side;

/// What a master needs from a child it started (implemented by child_process).
class child_endpoint {
 public:
  virtual ~child_endpoint() = default;
  virtual void on_hello(const std::string& hello_json) = 0;
  virtual void on_done(bool raised, const std::string& detail) = 0;
  /// The master is shutting down: kill, reap, and complete whoever waits.
  virtual void on_master_shutdown() noexcept = 0;

  /// The child's job while it runs. A child that ends without a word (killed, crashed) closes its
  /// link, and only its engine tells how it ended: one that polls for ends (Slurm's squeue) is
  /// told to look soon (job::expect_exit), not at its quiet pace.
  std::weak_ptr<job> ends_with_link;
};

class master_side final : public std::enable_shared_from_this<master_side> {
 public:
  /// Everything referred to outlives this (the runtime owns them all).
  master_side(asio::io_context& io, zmq_context& zctx, const fiber::config& cfg, const std::string& job_id,
              const job_keys& keys, pending_gets& gets, service_registry& services);
  ~master_side();

  /// Binds the listening socket on first use; returns the endpoint children connect to.
  const std::string& listen() { return links_->listen(engine()); }
  /// How children reach this master (valid after listen()): their transport, credentials, hubs.
  const child_links& links() const noexcept { return *links_; }
  /// The tree's queues and pipes (this process's channel_route when it is the top master).
  master_channels& channels() noexcept { return channels_; }
  /// Where the tree's reports for the recording and the dashboard go.
  tree_reports& reports() noexcept { return reports_; }
  /// The backend children are started with (hub_workers=fork: the one whose hubs fork them).
  backend& the_backend();
  /// A backend other than config `backend`'s own (a nested master on a cluster backend: the one
  /// that asks the top master); before the first use of the_backend().
  void use_backend(std::unique_ptr<backend> b) { backend_ = std::move(b); }
  asio::io_context& io() noexcept { return io_; }

  void attach_child(const std::string& routing_id, std::weak_ptr<child_endpoint> child);
  void detach_child(const std::string& routing_id);
  void send_to_child(const std::string& routing_id, multipart&& parts);
  /// As send_to_child, but tells: an error means the child's connection is gone, and `parts`
  /// is left as it was.
  std::error_code try_send_to_child(const std::string& routing_id, multipart&& parts) {
    return links_->send(routing_id, std::move(parts));
  }
  /// Children still running, and what to do with them when the master goes. Held weakly: a
  /// child's object may go before its process is reaped (a manager dropped on a caller's loop
  /// asks its server to stop and lets go), and its job, whose end kills and reaps, goes with it.
  void track_job(const std::shared_ptr<job>& j);
  void untrack_job(const job* j);
  std::vector<int> live_pids() const;

  /// A child's master that is itself a child (nested): the queues and pipes of the whole tree are
  /// served by the top master, so its children's puts and gets go up through `upstream` (its own
  /// route), and the answers come back down (docs/design.md, "Nested processes").
  void forward_channels_to(worker_side* upstream);
  /// Nested: a reply from above to a call this master passed up for a child; true when it was
  /// one, and it went down.
  bool pass_reply_down(const header& h, multipart& payload);
  /// Nested: child `routing_id`'s channel prefix (its queues and pipes end with it).
  void note_prefix(const std::string& routing_id, std::uint32_t prefix);
  /// Ends the children, their jobs, the hubs, the backend and the listener; idempotent.
  void shutdown() noexcept;

 private:
  backend& engine();
  /// A message from child `peer`; its header is m[first].
  void handle(const std::string& peer, multipart&& m, std::size_t first);
  /// A message for service h.channel: to the service, up (nested), or answered that it is gone.
  void to_service(const std::string& peer, const header& h, multipart&& payload);
  /// kind::hello and kind::done: to the child's object.
  void child_news(const std::string& peer, const header& h, const multipart& payload);

  asio::io_context& io_;
  const fiber::config& cfg_;
  const std::string& job_id_;
  pending_gets& gets_;
  service_registry& services_;
  master_channels channels_;
  tree_reports reports_;
  std::unique_ptr<backend> backend_;
  std::shared_ptr<child_links> links_;  // after backend_: its hubs are the backend's jobs
  std::shared_ptr<upward_relay> upward_;  // nested: to the master above
  std::unordered_map<std::string, std::weak_ptr<child_endpoint>> children_;
  std::vector<std::weak_ptr<job>> live_jobs_;
  bool closed_ = false;
};

}  // namespace fiber::detail
