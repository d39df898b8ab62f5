// A call's time request: when a call says how long each of its items takes (task_estimate), its
// items go only to workers that their engine will not end sooner (a Slurm job's time limit), as
// HyperQueue's time request does. A worker with less time left than that is retired once it
// holds nothing, so that its replacement starts now rather than when its notice comes; and a call
// whose items take longer than even a new worker gets fails with an error that says so, where
// waiting for a worker with the time would never end. Workers whose engine plans no end (local
// processes, containers, pods) take everything, and a call without an estimate is not looked at.
// On fiber's loop thread.
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "primitives/pool/pool_worker.hpp"

namespace fiber::detail {
class worker_set;
class task_queue;
struct pool_submission;

class time_request {
 public:
  using clock = std::chrono::steady_clock;

  /// What a call whose items each take `estimate` makes of a worker.
  enum class fit {
    fits,       // it has the time (or its engine plans no end)
    finishing,  // it has not, and finishes what it holds first
    retire,     // it has not, and holds nothing: it leaves, and its replacement starts now
    never,      // it has not, and had not at its start either: no new worker would
  };
  /// `left`: until its engine ends it (none: no end planned); `lifetime`: what it had at its
  /// start (none: unknown, or a worker taken up).
  static fit judge(std::optional<clock::duration> left, std::optional<clock::duration> lifetime, bool holds_tasks,
                   std::chrono::milliseconds estimate);
  /// How long `w` has before its engine ends it, at `now`; none where no end is planned (or not
  /// said yet).
  static std::optional<clock::duration> time_left(const pool_worker& w, clock::time_point now);
  /// Whether `w` may be sent items that each take `estimate` (0: no estimate, always).
  static bool has_time(const pool_worker& w, std::chrono::milliseconds estimate, clock::time_point now) {
    return estimate.count() <= 0 || judge(time_left(w, now), std::nullopt, true, estimate) == fit::fits;
  }
  /// Why a call whose items take `estimate` fails: `worker` had `lifetime` at its start.
  static std::string too_long(const std::string& worker, clock::duration lifetime, std::chrono::milliseconds estimate);

  time_request(std::uint64_t pool_id, worker_set& workers, task_queue& tasks)
      : pool_id_(pool_id), workers_(workers), tasks_(tasks) {}

  /// No worker takes `sub`'s next chunk: the workers without the time its items take and holding
  /// nothing are retired, or, where a new worker has less, the call fails. True when it failed.
  bool short_of_time(const pool_submission& sub, clock::time_point now);

 private:
  std::uint64_t pool_id_;
  worker_set& workers_;
  task_queue& tasks_;
};

}  // namespace fiber::detail
