// The per-process engine behind fiber::context, composed of parts with one job each: the event
// loop (who runs the io_context), the ZeroMQ context, the reads this process waits for, the
// services peers talk to, what it tells of its run (runtime/observe/run_observer), what the
// context waits for before it ends (runtime/end_holds), and the master's side (children, links,
// the tree's queues), a worker's (its connection to the master), or both in a nested master.
// Everything here runs on the loop.
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
#include "runtime/end_holds.hpp"
#include "runtime/observe/run_observer.hpp"
#include "runtime/event_loop.hpp"
#include "runtime/trust/job_security.hpp"
#include "runtime/master_side.hpp"
#include "runtime/channels/pending_gets.hpp"
#include "runtime/protocol.hpp"
#include "transport/zmq_context.hpp"
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
  runtime(fiber::config cfg, std::string job_id, job_keys keys, const std::string& master_endpoint, const std::string& token);
  ~runtime();

  // ---- the loop (see event_loop)
  event_loop& loop() noexcept { return loop_; }
  asio::io_context& io() noexcept { return loop_.io(); }
  /// Runs `f` on the loop without waiting on a loop that nobody may be running: now when this
  /// thread can, else posted to the caller's io_context. Nothing once the runtime has shut down.
  void run_soon(unique_function<void()> f);
  /// What the context waits for before it ends (a non-daemon process whose object went).
  end_holds& holds() noexcept { return holds_; }

  const fiber::config& cfg() const noexcept { return cfg_; }
  /// A worker takes its master's config from the welcome (its heartbeat timing too).
  void replace_config(fiber::config cfg);
  bool is_shut_down() const noexcept { return shut_down_; }
  const std::string& job_id() const noexcept { return job_id_; }
  /// A worker's credentials with its master (which a master taking a durable run up replaces:
  /// the worker side keeps them); a master's own.
  const job_keys& keys() const noexcept;

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
  /// The run's recording and dashboard, and what this process tells of its run to the top master.
  run_observer& observer() noexcept { return observer_; }

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
  zmq_context zctx_;  // made when a ZeroMQ socket is first opened
  pending_gets gets_;
  service_registry services_;
  run_observer observer_{loop_, cfg_};  // after the loop: the dashboard's sockets are the loop's
  end_holds holds_{loop_};
  std::shared_ptr<master_side> master_;
  std::shared_ptr<worker_side> worker_;
  channel_route* route_ = nullptr;  // master_ or worker_
  std::atomic<std::uint64_t> next_channel_{1};
  std::uint64_t channel_prefix_ = 0;
  bool shut_down_ = false;
};

}  // namespace fiber::detail
