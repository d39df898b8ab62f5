// The per-process engine behind fiber::context, composed of parts with one job each: the event
// loop (who runs the io_context), the ZeroMQ context, the reads this process waits for, the
// services peers talk to, and either the master's side (listening socket, children, broker,
// backend) or a worker's (its connection to the master). Everything here runs on the loop.
#pragma once
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <atomic>
#include <chrono>
#include <map>
#include <unordered_map>
#include <memory>
#include <optional>
#include <string>
#include <zmq.hpp>

#include "core/flight_recorder.hpp"
#include "fiber/codec.hpp"
#include "fiber/config.hpp"
#include "runtime/observe/dashboard.hpp"
#include "runtime/event_loop.hpp"
#include "runtime/trust/job_security.hpp"
#include "runtime/master_side.hpp"
#include "runtime/channels/pending_gets.hpp"
#include "runtime/protocol.hpp"
#include "runtime/services/service_registry.hpp"
#include "runtime/worker_side.hpp"
#include "transport/message_frames.hpp"
#include "transport/zmq_channel.hpp"

namespace fiber::detail {

class runtime : public std::enable_shared_from_this<runtime> {
 public:
  using get_handler = pending_gets::handler;

  /// A master: owns an io_context and a thread when `external` is null.
  runtime(asio::io_context* external, fiber::config cfg);
  /// A worker: connects to its master; the caller runs io() on its own thread.
  runtime(fiber::config cfg, std::string job_id, job_keys keys, std::string master_endpoint, std::string token);
  ~runtime();

  // ---- the loop (see event_loop)
  asio::io_context& io() noexcept { return loop_.io(); }
  asio::any_io_executor executor() noexcept { return loop_.executor(); }
  bool in_loop_thread() const noexcept { return loop_.in_loop_thread(); }
  bool owns_loop() const noexcept { return loop_.owns_loop(); }
  void wait_until(const std::atomic<bool>& done) { loop_.wait_until(done); }
  void notify_done(std::atomic<bool>& done) noexcept { loop_.notify_done(done); }
  void drive(unique_function<void()> start, const std::atomic<bool>& done) { loop_.drive(std::move(start), done); }

  // ---- what the context waits for before it ends (a non-daemon process whose object went)
  /// Holds `what` until let_go(id), on the loop thread.
  std::uint64_t hold_until_end(std::shared_ptr<void> what, std::string name);
  void let_go(std::uint64_t id);
  /// Blocks until nothing is held, naming what it waits for; at once on the loop's own thread or
  /// with a caller's io_context (which this cannot run), where nothing is waited for.
  void wait_for_held();
  void run_sync(unique_function<void()> f) { loop_.run_sync(std::move(f)); }
  /// Runs `f` on the loop without waiting on a loop that nobody may be running: now when this
  /// thread can, else posted to the caller's io_context. Nothing once the runtime has shut down.
  void run_soon(unique_function<void()> f);

  const fiber::config& cfg() const noexcept { return cfg_; }
  /// A worker takes its master's config from the welcome (its heartbeat timing too).
  void replace_config(fiber::config cfg);
  bool is_shut_down() const noexcept { return shut_down_; }
  const std::string& job_id() const noexcept { return job_id_; }
  const job_keys& keys() const noexcept { return keys_; }
  zmq::context_t& zmq() noexcept { return zctx_; }

  /// The top of the job's tree: no master above it.
  bool is_master() const noexcept { return worker_ == nullptr; }
  /// How far below the top this process is: 0 in the master, 1 in its children, ...
  int depth() const noexcept { return depth_; }
  /// The side that starts children and hears from them. A child that starts children of its own
  /// becomes their master here, on first use (nested; throws fiber::error(unsatisfiable) past
  /// config max_depth).
  master_side& master();
  /// A nested master's child learns its channel prefix in its welcome (the top master's children
  /// use their routing id).
  void set_channel_prefix(std::uint32_t prefix) noexcept { channel_prefix_ = std::uint64_t{prefix} << 32; }
  /// A worker's side; throws fiber::error(not_started) in a master.
  worker_side& worker();
  service_registry& services() noexcept { return services_; }
  /// The run's flight recorder: on in a master (config record), off in a worker.
  flight_recorder& recorder() noexcept { return recorder_; }
  /// The run's live page (config dashboard, in the top master), or null.
  dashboard* run_dashboard() noexcept { return dashboard_.get(); }
  /// A nested master whose run has a dashboard: its pools are shown on the top's page, each state
  /// sent up (kind::pool_view), `ended` with its last. False in the top master and without one.
  bool shows_pools_upstream() const noexcept { return worker_ && master_ && cfg_.dashboard; }
  void show_pool_upstream(std::uint64_t pool, std::string_view state, bool ended);
  /// Records an event of a child this process started (`name`: its name in the tree): here in the
  /// top master, else sent up to it (a nested master's children are in the run's recording too).
  void record_child_event(record_kind k, std::string_view name, std::uint64_t c, std::uint64_t d = 0,
                          std::string_view text = {});

  /// Records this process's memory now (record_kind::memory), when it records.
  void record_memory();
  /// The process's last memory record, once: a worker takes it before it reports `done` (so it is
  /// in the recording before its end), and shutdown() takes it where that did not happen.
  void record_last_memory();
  /// The top master: a nested master's records (kind::record_batch) into the run's recording.
  void take_record_batch(std::uint64_t sender, std::uint64_t child_now, std::string_view tree, std::string_view records);

  // ---- queues and pipes, on the loop thread
  std::uint64_t new_channel_id() noexcept;
  /// Throws message_too_large before anything is sent.
  void put(std::uint64_t channel, writer& w);
  void get(std::uint64_t channel, std::optional<std::chrono::milliseconds> timeout, get_handler h);
  void release(std::uint64_t channel) noexcept;

  /// Stops: kills children still running, closes sockets. Idempotent; on the loop thread.
  void shutdown() noexcept;
  /// Shuts down and stops the owned thread; safe from any thread.
  void stop() noexcept;

 private:
  fiber::config cfg_;
  std::string job_id_;
  job_keys keys_;
  job_keys subtree_keys_;  // nested: the credentials of this process's own children
  int depth_ = 0;
  event_loop loop_;
  zmq::context_t zctx_;
  pending_gets gets_;
  service_registry services_;
  flight_recorder recorder_;
  std::unique_ptr<dashboard> dashboard_;  // before the loop goes: its sockets are the loop's
  std::map<std::uint64_t, std::unordered_map<std::uint32_t, std::uint32_t>> relayed_names_;  // by sender: its name numbers -> ours
  /// Records the memory every record_memory_ms while this runs (on the loop).
  void sample_memory_every();
  std::unique_ptr<asio::steady_timer> memory_timer_;
  std::atomic<bool> last_memory_recorded_{false};
  std::shared_ptr<master_side> master_;
  std::shared_ptr<worker_side> worker_;
  channel_route* route_ = nullptr;  // master_ or worker_
  std::atomic<std::uint64_t> next_channel_{1};
  std::uint64_t channel_prefix_ = 0;
  bool shut_down_ = false;
  std::map<std::uint64_t, std::pair<std::shared_ptr<void>, std::string>> held_;  // see hold_until_end
  std::uint64_t next_held_ = 0;
  std::atomic<bool> none_held_{true};
};

}  // namespace fiber::detail
