/// @file
/// What a pool is built with (pool_options, an initializer bound with
/// bind_remote), what one call through pool::with() may change (call_options), and what
/// pool::stats() reports.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "fiber/meta.hpp"
#include "fiber/registry.hpp"

namespace fiber {

/// A registered function with its arguments, encoded: what a pool runs once per worker.
struct remote_call {
  detail::encoded_call call;  ///< the function's registry id and its encoded arguments
};
/// `f` bound to `args`, checked against its parameters here: a pool's initializer,
/// `pool_options{.initializer = bind_remote(&load_model, path)}`.
template <class R, class... P, class... A>
remote_call bind_remote(R (*f)(P...), A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "fiber::bind_remote: wrong number of arguments for the function");
  const auto& entry = detail::require_registered(f);
  remote_call c{{entry.id, entry.name, {}}};
  c.call.args.value(std::tuple<std::decay_t<P>...>(std::forward<A>(args)...));
  return c;
}

/// What a pool is built with: how many workers, what each needs, how items are retried, what
/// runs first in each worker. Designated initializers name what differs from the defaults.
struct pool_options {
  std::optional<int> processes;  ///< unset: cpu_count(); at least 1
  int max_attempts = 3;          ///< an item whose running took down this many workers fails with worker_lost
  bool retry = true;             ///< false: the items a dead worker had not reported fail at once (none runs twice)
  int maxtasksperchild = 0;      ///< a worker is replaced after this many chunks; 0: never
  int prefetch = 1;              ///< chunks a worker may hold beyond the one it runs
  /// A worker running a chunk sends the results it has at least this often (and whenever 1 MiB
  /// waits), so a death reruns only the items not yet reported; 0: after every item.
  std::chrono::milliseconds report_interval{5};
  bool progress = false;         ///< a progress line on stderr for long maps, when it is a terminal
  std::optional<remote_call> initializer;  ///< run once in each worker before its first task
  meta needs;  ///< workers start with at least these; a function's FIBER_META raises them (see below)
  /// An item running longer fails with errc::timed_out; its worker is killed and replaced at
  /// once. 0: no limit. With a limit, workers report each item as it ends (a message per item).
  std::chrono::milliseconds task_timeout{0};
  bool retry_timed_out = false;  ///< true: a timed-out item runs again, up to max_attempts in all
  /// How long one item takes, for a worker told of its planned end (drain_notice_ms): it finishes
  /// the item it runs if this fits in what is left of the notice, else hands it back at once.
  /// 0: learned from the items this worker ran (an item with none to learn from runs until the
  /// notice is nearly out, then is handed back). Said (not learned), it is also a time request:
  /// the items go only to workers their engine will not end sooner (a Slurm job's time limit),
  /// one with less time left is replaced, and a call whose items take longer than a new worker
  /// gets fails with errc::unsatisfiable.
  std::chrono::milliseconds task_estimate{0};
};

/// Per-call choices, for the calls made through pool::with(...).
struct call_options {
  bool retry = true;  ///< false: the items a dead worker had not reported fail with worker_lost (none runs twice)
  std::optional<std::chrono::milliseconds> task_timeout;  ///< unset: the pool's; 0: no limit
  std::optional<bool> retry_timed_out;                    ///< unset: the pool's
  std::optional<std::chrono::milliseconds> task_estimate;  ///< unset: the pool's
};

/// Counted in items (one call of the function); a chunk is the batch of items a worker is sent.
struct pool_stats {
  std::size_t queued = 0;           ///< items waiting for a worker
  std::size_t running = 0;          ///< items held by workers, their results not yet in
  std::size_t done = 0;             ///< items finished, with a result or an error
  std::size_t retried = 0;          ///< items sent again after their worker died
  std::size_t workers_lost = 0;     ///< workers that died or stopped answering
  /// Workers that ended on a notice of their planned end (a Slurm job's time limit, a pod's
  /// eviction, docker stop, SIGTERM): what they held ran elsewhere, no item charged an attempt.
  std::size_t drained = 0;
  std::size_t memory_exceeded = 0;  ///< workers stopped for going past their memory limit
  std::size_t workers = 0;          ///< workers now
  std::size_t workers_started = 0;  ///< workers started since the pool was made, replacements included
  /// fiber::shared objects (each goes to a worker once, however many items hold it):
  std::size_t shared_objects_sent = 0;  ///< deliveries to workers, in their messages or as a map of host memory
  std::uint64_t shared_bytes_sent = 0;  ///< their bytes in the workers' messages
  std::uint64_t shared_bytes_host = 0;  ///< their bytes copied into this host's shared memory (once per object)
};

}  // namespace fiber
