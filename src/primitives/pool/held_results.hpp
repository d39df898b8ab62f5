// What a durable run's pool worker keeps for a master that takes the run up after its own died:
// a copy of each message of results of its tasks until its master says the journal on disk holds
// them (its master may die before it reads them, or before its journal is durable), which task
// runs now, and where each task began. A master that never says so (its disk refuses) leaves the
// worker holding up to a bound in bytes, past which the oldest go (their items may run again).
// Copies of ZeroMQ messages share their bytes (a large result is counted, not copied). Read by
// the worker's reattach point from a thread of its own while the worker runs: behind a mutex.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "primitives/pool/message_log.hpp"
#include "transport/zmq_channel.hpp"

namespace fiber::detail {

/// What a worker holds, as a master taking it up reads it (the reattach point's state).
struct held_state {
  struct task {
    std::uint64_t id = 0;     // the last master's id
    std::uint32_t skip = 0;   // the chunk's first item it ran
    bool running = false;     // not all its results were made yet
    // Its chunk, as its master named it (task_head): the call, its first item, its identity.
    std::uint32_t call = 0;
    std::uint64_t first = 0;
    std::uint64_t identity = 0;
  };
  std::uint64_t pool_id = 0;  // the last master's id of the pool
  std::vector<task> tasks;    // in the order they came
};

class held_results {
 public:
  static constexpr std::size_t default_bound = std::size_t{256} << 20;
  /// The most tasks held, whatever their bytes: what the worker says of them stays a few MB.
  static constexpr std::size_t most_tasks = 500'000;
  /// Holds up to `bound` bytes of messages (the running task's whatever their size).
  explicit held_results(std::size_t bound = default_bound) : bound_(bound) {}

  /// Task `id` begins with the chunk's item `skip`: false, and nothing noted, when its master is
  /// gone (a task it sent that waited behind the last is not run: no master can take its
  /// results, and the one taking the run up, told only what began, gives the chunk to another).
  bool begin(std::uint64_t id, std::uint32_t skip, std::uint32_t call = 0, std::uint64_t first = 0,
             std::uint64_t identity = 0);
  /// The master is gone / another master took the worker up (its tasks are another master's,
  /// numbered anew).
  void orphan();
  void adopted();
  /// This worker's master made its journal durable with the results of its tasks up to `task`
  /// (0: none of them); `old`: and with those of the last masters' tasks this worker held when it
  /// took it up. What it holds of them goes.
  void journaled(std::uint64_t task, bool old);
  /// A message of the running task's results, before it is sent; `last`: its final one.
  void keep(const multipart& m, bool last);
  /// What it holds, as pool `pool_id`'s worker: held_state, packed.
  std::string state(std::uint64_t pool_id) const;
  /// Copies of the messages kept, in the order they were sent.
  std::vector<multipart> copies() const;

 private:
  struct task_messages {
    held_state::task task;
    std::uint64_t master = 0;  // which master it was for: the adoptions before it
    std::uint64_t from = 0;    // its messages in log_: [from, to)
    std::uint64_t to = 0;
    std::size_t bytes = 0;
  };
  /// The oldest task goes, and its messages.
  void pop_oldest();
  /// The oldest finished tasks go while more than bound_ is held.
  void trim();
  /// Up to `most` tasks from the oldest on go while the master's journal holds them.
  void prune(std::size_t most);
  bool journaled_already(const task_messages& t) const;
  std::size_t bound_;
  mutable std::mutex mutex_;
  std::deque<task_messages> tasks_;
  message_log log_;
  std::size_t bytes_ = 0;
  std::uint64_t master_ = 0;  // adoptions so far
  std::uint64_t journaled_ = 0;  // this master's tasks up to this one are in its journal on disk
  bool old_journaled_ = false;   // ... and the last masters' that it held
  bool orphaned_ = false;
};

/// held_results::state's bytes, read back; fiber::error(protocol_error) when they are not whole.
held_state read_held_state(std::string_view in);

}  // namespace fiber::detail
