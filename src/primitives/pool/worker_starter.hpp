// How a pool's workers are started: the call each runs (the pool's worker loop with its options
// and initializer), the name and needs it starts with, how many may be starting at once on this
// host, and what a failed start means for the next: a worker killed from outside says nothing;
// max_start_failures in a row, or a need no node meets, mean workers cannot start, until new
// work tries again. On fiber's loop thread.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <system_error>

#include "fiber/detail/unique_function.hpp"
#include "fiber/meta.hpp"
#include "fiber/pool_options.hpp"

namespace fiber::detail {
class runtime;
class child_process;
class job;
struct spawn_spec;

class worker_starter {
 public:
  static constexpr int max_start_failures = 3;

  worker_starter(runtime& rt, std::uint64_t pool_id, const pool_options& options)
      : rt_(rt), pool_id_(pool_id), options_(options) {}

  /// A new worker's process with `needs`, named PoolWorker-<pool>-<n> and owned by the pool; not
  /// started yet. With `take`, a process that runs already, taken up (child_process::adopter).
  std::shared_ptr<child_process> make(const meta& needs, unique_function<std::unique_ptr<job>(const spawn_spec&)> take = nullptr);
  /// How many workers may be starting at once: local children a few per core (thousands started
  /// at once on a few cores missed their handshake deadline); an engine that queues takes all.
  std::size_t limit() const;
  /// Workers made so far.
  std::size_t made() const noexcept { return static_cast<std::size_t>(made_); }

  enum class verdict {
    ignore,     // it says nothing of the next start (killed from outside, or other needs)
    try_next,   // counted; the next start may succeed
    give_up,    // workers with these needs cannot start
  };
  /// A worker could not start (`ec`, `what`; `exit_code` if it exited): `same_needs` when it was
  /// started with the needs new workers get now.
  verdict failed(bool same_needs, std::error_code ec, const std::string& what, std::optional<int> exit_code);
  /// A worker passed its handshake, or the needs changed: failures count from nothing again.
  void start_over() noexcept { failures_ = 0; }
  /// Workers cannot start (give_up was said and no new work came since).
  bool stopped() const noexcept { return stopped_; }
  void stop() noexcept { stopped_ = true; }
  /// New work tries again after workers could not start; false when they could.
  bool try_again() noexcept;

 private:
  runtime& rt_;
  std::uint64_t pool_id_;
  const pool_options& options_;
  int made_ = 0;
  int failures_ = 0;  // in a row, not counting workers killed from outside
  bool stopped_ = false;
};

}  // namespace fiber::detail
