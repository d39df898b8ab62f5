// A pool's items under a task_timeout: when the item each worker runs started, the one timer at
// the earliest deadline (item_deadlines), and the workers whose item ran past it, ended: the item
// fails with timed_out (or runs again, as its call says), the tasks behind it run again
// elsewhere, and the run's recording and the dashboard say so. Idle until a call with a
// task_timeout comes (use()). On fiber's loop thread.
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "fiber/detail/unique_function.hpp"
#include "fiber/pool_options.hpp"
#include "primitives/pool/item_deadlines.hpp"
#include "primitives/pool/pool_view.hpp"
#include "primitives/pool/task_queue.hpp"
#include "primitives/pool/worker_set.hpp"

namespace fiber::detail {
class runtime;

class late_items {
 public:
  using clock = std::chrono::steady_clock;
  /// `after` runs once late workers were ended (the pool dispatches what went back to the queue).
  late_items(runtime& rt, std::uint64_t pool_id, const pool_options& options, task_queue& tasks, worker_set& workers,
             pool_view& view, unique_function<void()> after);

  /// From now on items are timed (a call has a task_timeout).
  void use() { deadlines_.use(); }
  /// Now, where items are timed, else nullopt: what is said of a worker's item carries it.
  worker_load::maybe_now now() const;
  /// `w`'s item started (its first task's send, a result, a report): its deadline is watched.
  void started(const pool_worker& w);
  void cancel() noexcept { deadlines_.cancel(); }

  /// When the item `w` runs is due: its start plus its call's timeout; none when it holds nothing,
  /// is leaving, or its call has no timeout.
  static std::optional<clock::time_point> deadline_of(const pool_worker& w, const task_queue& tasks);
  /// Of `workers`, those whose item is due at `now`, and the next deadline after it.
  struct scan_result {
    std::vector<const pool_worker*> late;
    std::optional<clock::time_point> next;
  };
  static scan_result scan(const std::vector<const pool_worker*>& workers, const task_queue& tasks, clock::time_point now);

 private:
  std::optional<clock::time_point> end_late();

  runtime& rt_;
  std::uint64_t pool_id_;
  const pool_options& options_;
  task_queue& tasks_;
  worker_set& workers_;
  pool_view& view_;
  unique_function<void()> after_;
  item_deadlines deadlines_;
};

}  // namespace fiber::detail
