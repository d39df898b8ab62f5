// What becomes of the tasks a worker held when it died or ran past an item's deadline. The oldest
// is the one it was running: ended from outside (pool/outside_deaths), it runs again as it was,
// uncharged; otherwise, of its items, the first not yet reported is charged an attempt and runs
// again alone (a task of its own, on a worker given nothing else, so that the next death is
// surely its), and the rest of its chunk runs again uncharged, in pieces that report item by item
// at first; out of attempts, or without retries, items fail with a reason that names the worker
// and how it ended. The tasks waiting behind it (prefetch) go back as they were. On fiber's loop
// thread.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "primitives/pool/item_delivery.hpp"
#include "primitives/pool/pool_submission.hpp"

namespace fiber::detail {

class task_losses {
 public:
  /// Items fail through `delivery`; the pieces a charged task is cut into are numbered from
  /// `next_id`, the queue's own count.
  task_losses(item_delivery& delivery, std::uint64_t& next_id) : delivery_(delivery), next_id_(next_id) {}

  /// A worker died (`end` says which and how) holding `tasks`, in the order sent: the tasks to
  /// queue again, at the front, in this order. Without retries (`pool_retry` or the call's own),
  /// every item of the running chunk not yet reported fails: each may have run. A worker stopped
  /// for memory while surely running one item (alone, or the last it held) fails that item with
  /// errc::memory_exceeded, unless such items run again (`retry_memory`); the rest go on.
  std::vector<pool_task> after_death(std::vector<pool_task> tasks, const worker_end& end, bool pool_retry,
                                     int max_attempts, bool retry_memory = false);
  /// The item running on `worker_name` passed its call's timeout: it fails with errc::timed_out
  /// (or is charged an attempt and runs again, if its call says so); the tasks to queue again.
  std::vector<pool_task> after_timeout(std::vector<pool_task> tasks, const std::string& worker_name, int max_attempts);

  /// Items queued again after a loss, in all.
  std::size_t retried() const { return retried_; }

 private:
  /// The running task `t`, its first item charged: that item alone, then the rest (if any), in
  /// pieces of a quarter of its call's chunksize.
  void split_charged(pool_task&& t, std::vector<pool_task>& out);
  /// The running task `t` of a worker stopped for memory: true when its items failed (its one
  /// item, or without `retries` all it had not reported), false to charge it as any death.
  bool failed_for_memory(pool_task& t, const worker_end& end, bool retries);

  item_delivery& delivery_;
  std::uint64_t& next_id_;
  std::size_t retried_ = 0;
};

}  // namespace fiber::detail
