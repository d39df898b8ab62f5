// What a durable run's pool worker keeps for a master that takes the run up after its own died:
// a copy of each message of results of its last few tasks (its master may have died before it
// read them, or before its journal kept them), which task runs now, and where each task began.
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

#include "transport/zmq_channel.hpp"

namespace fiber::detail {

/// What a worker holds, as a master taking it up reads it (the reattach point's state).
struct held_state {
  struct task {
    std::uint64_t id = 0;     // the last master's id
    std::uint32_t skip = 0;   // the chunk's first item it ran
    bool running = false;     // not all its results were made yet
  };
  std::uint64_t pool_id = 0;  // the last master's id of the pool
  std::vector<task> tasks;    // in the order they came
};

class held_results {
 public:
  /// Keeps the messages of the last `tasks_kept` tasks (a worker's credit: the master may not
  /// have read the results of as many as it gave it).
  explicit held_results(std::size_t tasks_kept) : kept_(tasks_kept) {}

  /// Task `id` begins with the chunk's item `skip`: false, and nothing noted, when its master is
  /// gone (a task it sent that waited behind the last is not run: no master can take its
  /// results, and the one taking the run up, told only what began, gives the chunk to another).
  bool begin(std::uint64_t id, std::uint32_t skip);
  /// The master is gone / another master took the worker up.
  void orphan();
  void adopted();
  /// A message of the running task's results, before it is sent; `last`: its final one.
  void keep(const multipart& m, bool last);
  /// What it holds, as pool `pool_id`'s worker: held_state, packed.
  std::string state(std::uint64_t pool_id) const;
  /// Copies of the messages kept, in the order they were sent.
  std::vector<multipart> copies() const;

 private:
  struct task_messages {
    held_state::task task;
    std::vector<multipart> messages;
  };
  std::size_t kept_;
  mutable std::mutex mutex_;
  std::deque<task_messages> tasks_;
  bool orphaned_ = false;
};

/// held_results::state's bytes, read back; fiber::error(protocol_error) when they are not whole.
held_state read_held_state(std::string_view in);

}  // namespace fiber::detail
