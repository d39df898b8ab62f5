// One of a pool's workers as its worker_set keeps it: its process, what it was started with, and
// what it holds. Only worker_set writes one; everyone else reads it const.
#pragma once
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "fiber/meta.hpp"

namespace fiber::detail {
class child_process;

/// One worker, as its set keeps it (read-only outside worker_set).
struct pool_worker {
  std::shared_ptr<child_process> proc;
  std::string rid;  // its routing id: the peer its messages come from
  meta needs;       // what it was started with, filled in (worker_needs::full)
  bool connected = false;
  bool leaving = false;  // told to stop (close, resize), or retiring (maxtasksperchild), or draining
  bool draining = false;  // it had notice of its planned end and hands back what it holds
  int credit = 0;        // chunks it can take now
  int completed = 0;            // chunks, counted with maxtasksperchild only
  std::uint64_t items_done = 0;  // the dashboard's count of the items it finished
  std::deque<std::uint64_t> tasks;  // in the order sent, which is the order it runs them
  bool holds_alone = false;         // it runs a task that must run alone: it gets nothing else
  bool offered = false;             // in worker_set's list of workers that may have credit
  std::chrono::steady_clock::time_point running_since;  // of the item it runs: its last report, or its first task's send
  std::string why_ended;  // when the pool ended it: why (else its exit says)
  std::uint32_t recorded_as = 0;  // its name's number in the flight recorder, once it connected
  std::optional<std::chrono::steady_clock::time_point> stopped_since;  // local: seen stopped (SIGSTOP)
  bool taken_up = false;  // it ran already: a durable run's worker a master taking the run up adopted
  /// At its handshake, how long until its engine ends it (a Slurm job's time limit): what a new
  /// worker gets. None where no end is planned, and for a worker taken up.
  std::optional<std::chrono::steady_clock::duration> lifetime;
};

/// Every worker is its set's own, and the set's parts (worker_set, worker_load) may write it: the
/// const their callers see is what keeps those from writing.
inline pool_worker& own(const pool_worker& w) { return const_cast<pool_worker&>(w); }

}  // namespace fiber::detail
