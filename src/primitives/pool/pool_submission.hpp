// A call's work as the pool's master holds it: the submission (its sink, chunking, retries and
// deadline), the chunks of its items that workers run (tasks), and how a worker ended, for the
// errors of the items it held. Plain data; the queue, the feeder and the delivery act on it.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "backend/engine_run.hpp"
#include "fiber/detail/pool_sinks.hpp"
#include "fiber/meta.hpp"
#include "primitives/pool/referenced_ranges.hpp"
#include "transport/zmq_channel.hpp"

namespace fiber::detail {

struct pool_submission {
  std::uint64_t function_id;
  std::size_t chunksize;
  std::shared_ptr<pool_sink> sink;
  bool retry = true;
  meta needs;  // of the function: its tasks go only to workers that cover them
  std::size_t grow_to = 0;  // chunks double after each, up to this (an input of unknown size)
  std::chrono::milliseconds timeout{0};  // an item running longer fails (0: no limit)
  bool retry_timed_out = false;          // ... or runs again, as if its worker had died
  std::chrono::milliseconds estimate{0};  // what an item takes (task_estimate; 0: its worker learns)
  std::size_t next_index = 0;
  std::size_t outstanding = 0;  // items produced and not yet delivered
  bool input_done = false;
  bool finished = false;
  std::uint64_t recorded_as = 0;  // its number in the flight recorder (the pool's maps, from 1)
  referenced_ranges referenced{};  // what its items hold by reference, sent apart
};

/// A chunk of a submission's items, run by one worker. Its results come in batches (partials,
/// then the final result): each batch delivers the items from `begin` on, so [begin, end) is
/// what a death would lose.
struct pool_task {
  std::uint64_t id = 0;
  std::shared_ptr<pool_submission> sub;
  std::size_t first = 0;         // the submission's position of the first packed item
  std::size_t packed = 0;        // items in `args`
  std::size_t begin = 0, end = 0;  // the packed items not yet delivered, that this task runs
  std::shared_ptr<writer> args;  // packed items + large ranges, kept for a resend
  bool shares_objects = false;   // an item refers to an object an earlier item carried
  int attempts = 0;              // workers lost while `begin` was the item running
  bool careful = false;          // after a death: reported item by item at first (see wire.hpp)
  bool alone = false;            // a charged item, run on a worker that holds nothing else
  std::uint64_t identity = 0;    // a durable run's: its chunk's (durable_maps::identity)
  std::string worker;            // while in flight

  std::size_t count() const { return end - begin; }
  /// The submission's position of the item that runs first.
  std::size_t position() const { return first + begin; }
};

/// How a worker ended, for the errors of the items it held: "signal 9", "exit code 3", "it
/// stopped answering", or what its task's deadline did.
struct worker_end {
  std::string worker;  // its name
  std::string how;
  std::optional<memory_stop> memory{};  // it was stopped for going past its memory limit
  bool outside = false;                 // ended from outside (pool/outside_deaths): its item is not charged
  bool drained = false;                 // it had notice of its end and handed its work back: nothing is charged
};

}  // namespace fiber::detail
