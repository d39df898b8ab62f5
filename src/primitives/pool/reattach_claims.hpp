// The chunks a master taking a durable run up leaves to the workers it linked again. Each such
// worker said, at its reattach point, which of the last master's tasks it ran last and where each
// began; the journal says which chunk each task was (its call and first item). When the pool makes
// that chunk's task again, the task goes to that worker rather than to the queue, and what the
// worker sends of the old task is read as of the new one: its items lined up with those the
// journal already answered (a result is never delivered twice, and one the journal lacks is
// never skipped). A worker's messages of old tasks all come before its `ready` (it sends what it
// holds first): from its ready on, its messages are of this master's tasks. No process, no loop:
// the pool's master calls it on fiber's loop thread.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "transport/zmq_channel.hpp"

namespace fiber::detail {

class reattach_claims {
 public:
  /// Worker `worker` ran the last master's task `old_task`, chunk (call, first), from the chunk's
  /// item `skip` on; `identity`, when not 0, is the chunk's as the worker was told it: a chunk
  /// made with another is not the one it ran.
  void add(const std::string& worker, std::uint64_t old_task, std::uint32_t call, std::uint64_t first, std::uint64_t skip,
           std::uint64_t identity = 0);
  /// `worker` was linked again: until its ready, what it sends is of the last master's tasks,
  /// whether or not it claims any (one of no claim is read as of no task of this master's).
  void taken_up(const std::string& worker) { speaking_.insert(worker); }
  /// Whether `worker`'s messages of results are still of the last master's tasks (it has not said
  /// ready since it was linked again).
  bool speaks_of_old_tasks(const std::string& worker) const { return speaking_.contains(worker); }
  /// `worker` said ready: what it sends from now on is of this master's tasks.
  void ready(const std::string& worker) { speaking_.erase(worker); }
  bool empty() const noexcept { return claims_.empty(); }
  /// Whether `worker` has claims this master has not read yet.
  bool holds(const std::string& worker) const {
    auto it = claims_.lower_bound({worker, 0});
    return it != claims_.end() && it->first.first == worker;
  }

  /// The pool made task `task` for chunk (call, first) whose identity is `identity`: the worker
  /// that claims it (the task is that worker's, not the queue's), or nothing (a claim on a chunk
  /// of that place with another identity goes: its results are of other inputs).
  std::optional<std::string> claim(std::uint32_t call, std::uint64_t first, std::uint64_t task, std::uint64_t identity = 0);

  /// What to do with a message of `items` results (`final`: of the rest of its chunk) that
  /// `worker` sent of old task `old_task`.
  struct reading {
    enum { unknown, wait, drop, deliver, gap } what = unknown;
    std::uint64_t task = 0;  // deliver, gap: this master's task
    std::size_t skip = 0;    // deliver: the message's first items, which the journal answered
  };
  /// `begin`, `end`: the chunk's items the new task has left ([begin, end), within the chunk).
  /// unknown: no claim (its chunk runs again); wait: the chunk's task is not made yet (keep()
  /// the message); gap: the worker's results begin after an item nobody answered (the claim is
  /// dropped, and the task goes back to the queue).
  reading read(const std::string& worker, std::uint64_t old_task, bool final, std::size_t items,
               std::optional<std::pair<std::size_t, std::size_t>> left);
  /// The new task whose chunk `worker`'s `old_task` was (0 while not made).
  std::uint64_t task_of(const std::string& worker, std::uint64_t old_task) const;
  /// A message read() said to wait with; handed back by waiting() once its task is made.
  void keep(const std::string& worker, std::uint64_t old_task, multipart m);
  /// The messages kept for the claim that task `task` took, in the order they came.
  std::vector<multipart> waiting(std::uint64_t task);
  /// `worker` ended: its claims go (their tasks were its own, and go back with it).
  void forget(const std::string& worker);

 private:
  struct entry {
    std::uint32_t call = 0;
    std::uint64_t first = 0;
    std::uint64_t next = 0;      // the chunk's item its next message begins with
    std::uint64_t new_task = 0;  // once made
    std::uint64_t identity = 0;  // the chunk's, as its worker said it (0: not said)
    std::vector<multipart> kept;
  };
  using key = std::pair<std::string, std::uint64_t>;  // (worker, old task)
  std::map<key, entry> claims_;
  std::map<std::pair<std::uint32_t, std::uint64_t>, key> by_chunk_;
  std::set<std::string> speaking_;  // workers taken up that have not said ready yet
};

}  // namespace fiber::detail
