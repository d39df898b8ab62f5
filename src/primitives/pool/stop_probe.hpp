// The watch on a pool's workers that hold tasks. A stopped worker (SIGSTOP) keeps its process
// but not its use. On this host's unix sockets, where no heartbeat runs, the kernel says whether
// it is stopped, and one stopped for heartbeat_timeout_ms is killed; across a network ZeroMQ's
// heartbeat drops it, and then a probe message to it cannot be routed. Every heartbeat interval,
// only the workers that hold tasks: an idle one meets the same check when it is next sent a task
// (the master's dispatch), so an idle pool sends nothing. A part of worker_set, whose workers it
// marks (stopped_since, why_ended) and kills. On fiber's loop thread.
#pragma once
#include <asio/steady_timer.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "primitives/pool/pool_worker.hpp"

namespace fiber::detail {
class runtime;

class stop_probe {
 public:
  /// `workers` is the set's own map, which outlives this.
  stop_probe(runtime& rt, std::uint64_t pool_id, std::map<std::string, pool_worker>& workers);
  /// Probes every heartbeat_interval_ms while `owner` lives and the runtime runs.
  void start(std::weak_ptr<void> owner);
  void cancel() noexcept;

 private:
  void schedule();
  void probe();

  runtime& rt_;
  std::uint64_t pool_id_;
  std::map<std::string, pool_worker>& workers_;
  std::weak_ptr<void> owner_;
  std::unique_ptr<asio::steady_timer> timer_;
};

}  // namespace fiber::detail
