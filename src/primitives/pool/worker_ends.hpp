// How each of a pool's workers ended, in the pool's words, and what is counted of it: whether it
// was lost (an end the pool neither chose nor expected), drained (it had notice of its planned end
// and handed its work back), stopped for its memory, or ended from outside (pool/outside_deaths);
// the log line, the dashboard's failure note and the flight recorder's record of each end; and
// the counts stats() reports. On fiber's loop thread.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "primitives/pool/pool_submission.hpp"
#include "primitives/pool/pool_worker.hpp"

namespace fiber::detail {
class runtime;
class pool_view;
class task_queue;

class worker_ends {
 public:
  /// What a worker's end is for the pool: how its tasks are treated (`end`), whether it counts
  /// toward the bound on uncharged deaths in a row.
  struct verdict {
    worker_end end;
    bool bounded = false;
  };

  worker_ends(runtime& rt, std::uint64_t pool_id, pool_view& view, const task_queue& tasks)
      : rt_(rt), pool_id_(pool_id), view_(view), tasks_(tasks) {}

  /// `w` ended (`pool_ending`: the pool is terminating, or fiber is shutting down): logged,
  /// noted, recorded and counted.
  verdict ended(const pool_worker& w, bool pool_ending);

  std::size_t lost() const noexcept { return lost_; }
  std::size_t drained() const noexcept { return drained_; }
  std::size_t memory_exceeded() const noexcept { return memory_exceeded_; }

 private:
  runtime& rt_;
  std::uint64_t pool_id_;
  pool_view& view_;
  const task_queue& tasks_;
  std::size_t lost_ = 0;
  std::size_t drained_ = 0;
  std::size_t memory_exceeded_ = 0;  // workers stopped for going past their memory limit
};

class child_ending;

/// Whether a worker ended on a notice of its planned end, having handed its work back: it said so
/// (`draining`), or its exit (`ending`) says so.
bool handed_back(bool draining, const child_ending& ending);
bool handed_back(const pool_worker& w);
/// How a worker ended, in words ("signal 9", "drained: ...", "it stopped answering (signal 15)"):
/// `why_ended`, when the pool ended it, why.
std::string how_it_ended(bool draining, const child_ending& ending, const std::string& why_ended);
std::string how_it_ended(const pool_worker& w);

}  // namespace fiber::detail
