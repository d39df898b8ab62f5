// What each of a pool's workers holds, as dispatch sees it: its credit (the chunks it can take
// now), the tasks it runs in the order sent, the items it finished, when its running item started
// (for task_timeout), and the choice of the least loaded worker for the next chunk. A part of
// worker_set: the workers are the set's, and this writes only these fields of theirs. On fiber's
// loop thread.
#pragma once
#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "fiber/meta.hpp"
#include "primitives/pool/pool_worker.hpp"

namespace fiber::detail {

class worker_load {
 public:
  /// Where a pool times its items (task_timeout), what is said of a worker's item carries the
  /// time it starts (`now`; nullopt where nothing is timed): its first task's send, a result or a
  /// report, each followed by the next item.
  using maybe_now = std::optional<std::chrono::steady_clock::time_point>;

  /// The connected worker with credit that covers `needs` (filled in) and holds the fewest tasks:
  /// chunks spread over the pool. `alone`: only a worker that holds nothing; `estimate` (what
  /// each item takes; 0: not said): only a worker that its engine does not end sooner
  /// (time_request). Null when none can take one now.
  const pool_worker* least_loaded(const meta& needs, bool alone = false,
                                  std::chrono::milliseconds estimate = std::chrono::milliseconds(0));
  /// `w` was sent task `task` (`alone`: one that must run by itself); true when it is the only
  /// one it holds, whose item starts now.
  bool took(const pool_worker& w, std::uint64_t task, bool alone, maybe_now now);
  /// `w` finished task `task` (`items` of them) and has `credit` more.
  void finished(const pool_worker& w, std::uint64_t task, std::uint64_t items, int credit, maybe_now now);
  /// `w` reported `items` done one by one (a chunk resent after a death).
  void reported(const pool_worker& w, std::uint64_t items, maybe_now now);
  /// The tasks `w` holds, taken from it (the master failed or put them back).
  std::deque<std::uint64_t> take_tasks(const pool_worker& w);
  /// `w`'s credit grew by `credit` (it connected, or gave a chunk's credit back): least_loaded
  /// looks at it until its credit runs out.
  void credit(const pool_worker& w, int credit);
  /// `w` takes nothing more (it is leaving, unreachable, or gone).
  void no_credit(const pool_worker& w);
  /// `w` is about to be erased from its set.
  void forget(const pool_worker& w);

 private:
  std::vector<pool_worker*> offered_;  // workers that may have credit
};

}  // namespace fiber::detail
