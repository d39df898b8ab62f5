// fiber/pool_options.hpp - what a pool is built with (pool_options, an initializer bound with
// bind_remote), what one call through pool::with() may change (call_options), and what
// pool::stats() reports.
#pragma once
#include <cstddef>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "fiber/meta.hpp"
#include "fiber/registry.hpp"

namespace fiber {

/// A registered function with its arguments, encoded: what a pool runs once per worker.
struct remote_call {
  detail::encoded_call call;
};
template <class R, class... P, class... A>
remote_call bind_remote(R (*f)(P...), A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "fiber::bind_remote: wrong number of arguments for the function");
  const auto& entry = detail::require_registered(f);
  remote_call c{{entry.id, entry.name, {}}};
  c.call.args.value(std::tuple<std::decay_t<P>...>(std::forward<A>(args)...));
  return c;
}

struct pool_options {
  std::optional<int> processes;  // unset: cpu_count(); at least 1
  int max_attempts = 3;          // a task that took down this many workers fails with worker_lost
  bool retry = true;             // false: a task whose worker died fails at once (never runs twice)
  int maxtasksperchild = 0;      // a worker is replaced after this many chunks; 0: never
  int prefetch = 1;              // chunks a worker may hold beyond the one it runs
  bool progress = false;         // a progress line on stderr for long maps, when it is a terminal
  std::optional<remote_call> initializer;  // run once in each worker before its first task
  meta needs;  // workers start with at least these; a function's FIBER_META raises them (see below)
};

/// Per-call choices, for the calls made through pool::with(...).
struct call_options {
  bool retry = true;  // false: a task whose worker died fails with worker_lost (it never runs twice)
};

struct pool_stats {
  std::size_t queued = 0;        // tasks (items) waiting for a worker
  std::size_t running = 0;       // tasks (items) held by workers
  std::size_t done = 0;          // tasks (items) finished, with a result or an error
  std::size_t retried = 0;       // tasks (items) sent again after their worker died
  std::size_t workers_lost = 0;  // workers that died or stopped answering
  std::size_t workers = 0;       // workers now
};

}  // namespace fiber
