// A worker's side of the runtime: its one connection to the master (authenticated with the
// credentials it was given; a direct link when the master is on this host or remote_transport is
// direct, else ZeroMQ), the watch on that connection, the master's first answer, the
// commands for the worker's service loop, and the answers to its own reads and calls.
#pragma once
#include <asio/io_context.hpp>
#include <atomic>
#include <deque>
#include <mutex>
#include <memory>
#include <string>

#include "runtime/upstream_send_failure.hpp"
#include "fiber/config.hpp"
#include "runtime/channels/channel_route.hpp"
#include "runtime/links/socket_options.hpp"
#include "runtime/event_loop.hpp"
#include "runtime/trust/job_security.hpp"
#include "runtime/channels/pending_gets.hpp"
#include "runtime/services/service_registry.hpp"
#include "transport/stream_link.hpp"
#include "transport/zmq_channel.hpp"
#include "transport/zmq_context.hpp"

namespace fiber::detail {
class master_watch;
class link_pulse;

class worker_side final : public channel_route, public std::enable_shared_from_this<worker_side> {
 public:
  /// Connects to `master_endpoint` as `token` (its routing id). Everything referred to outlives
  /// this (the runtime owns them all). A worker that is not a local child (no parent pid in its
  /// environment, e.g. in a container) exits when its ZeroMQ connection to the master stays down.
  worker_side(event_loop& loop, zmq_context& zctx, const fiber::config& cfg, const job_keys& keys,
              const std::string& master_endpoint, const std::string& token, pending_gets& gets,
              service_registry& services);
  ~worker_side() override;

  void send_upstream(multipart&& parts);
  /// The config changed (the master's arrived): its heartbeat timing applies from now on.
  void retune();
  /// Starts receiving; `h` gets the master's first answer (welcome or refuse), header first.
  void on_first_message(unique_function<void(std::error_code, multipart)> h);
  /// Blocks (running the loop) until the master sends a command for this worker's service loop
  /// (a pool's task or stop, a manager call or stop); returns it with its header frame first.
  multipart next_service_message();
  /// A service message that came another way (a manager's direct link); on the loop thread.
  void push_service_message(multipart m);
  /// What to do when the master is gone (its link closed, or it stopped answering): by default the
  /// worker exits; a durable run's worker waits for a master that takes the run up instead. `f`
  /// runs on the loop, or on the thread of the watch of a link over ZeroMQ (where it must be
  /// safe to: set once, before the master can be lost).
  /// `link` says which link was lost: 0 the first, N after the Nth relink.
  void on_master_lost(unique_function<void(std::uint64_t link)> f) { master_lost_ = std::move(f); }
  /// `f` runs on the loop at each message to or from the master: the worker's work (what its
  /// memory sampler wakes for).
  void on_activity(unique_function<void()> f) { activity_ = std::move(f); }
  /// Links to another master (one that took a durable run up) as `token`; what the old link still
  /// says is not heard. The new master's welcome goes to on_first_message. On the loop thread.
  void relink(job_keys keys, const std::string& master_endpoint, const std::string& token);
  /// The credentials it links with.
  const job_keys& keys() const noexcept { return keys_; }
  /// Nested: replies to calls this process passed up for its children are theirs (master_side::
  /// pass_reply_down answers whether one was).
  void pass_replies_to(unique_function<bool(const header&, multipart&)> f) { pass_reply_ = std::move(f); }

  // channel_route: the broker is at the master
  void put(std::uint64_t channel, multipart&& payload) override;
  void get(std::uint64_t channel, std::uint64_t request) override;
  void cancel_get(std::uint64_t channel, std::uint64_t request) override;
  void release(std::uint64_t) noexcept override {}
  void maker_gone(std::uint32_t prefix) override;
  void shutdown() noexcept override;

 private:
  void connect(const std::string& master_endpoint, const std::string& token);
  void master_lost(std::uint64_t link);
  void receive_next();
  void handle(multipart&& m);

  event_loop& loop_;
  zmq_context& zctx_;
  job_keys keys_;
  const fiber::config& cfg_;
  pending_gets& gets_;
  service_registry& services_;
  std::shared_ptr<zmq_channel> upstream_;  // over ZeroMQ, or
  std::shared_ptr<stream_link> link_;      // a direct link (on this host, or over TLS)
  std::unique_ptr<link_pulse> pulse_;      // over TLS: speaks while a task runs
  bool link_started_ = false;
  std::unique_ptr<master_watch> master_watch_;
  upstream_send_failure send_failure_;
  unique_function<void(std::error_code, multipart)> first_message_;
  std::mutex inbox_mutex_;  // the loop may run on a standby thread (a worker that is also a master)
  std::deque<multipart> inbox_;
  std::atomic<bool> inbox_filled_{false};
  unique_function<bool(const header&, multipart&)> pass_reply_;
  unique_function<void(std::uint64_t)> master_lost_;
  unique_function<void()> activity_;
  std::uint64_t generation_ = 0;  // relinks so far: callbacks of an older link are not heard
  bool closed_ = false;
};

}  // namespace fiber::detail
