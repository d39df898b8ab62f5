// The pool's work: submissions that produce chunks of items (tasks), the tasks waiting for a
// worker, the tasks in flight, and the delivery of their results to the submissions' sinks.
// Which worker runs a task is the master's choice (pool/master.cpp); this queue never sees a
// process. On fiber's loop thread.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <list>
#include <map>
#include <memory>
#include <string>

#include "fiber/detail/pool_sinks.hpp"
#include "fiber/meta.hpp"
#include "transport/zmq_channel.hpp"

namespace fiber::detail {

struct pool_submission {
  std::uint64_t function_id;
  std::size_t chunksize;
  std::shared_ptr<pool_sink> sink;
  bool retry = true;
  meta needs;  // of the function: its tasks go only to workers that cover them
  std::size_t next_index = 0;
  std::size_t outstanding = 0;  // items produced and not yet delivered
  bool input_done = false;
  bool finished = false;
};

/// A chunk of a submission's items, run by one worker.
struct pool_task {
  std::uint64_t id = 0;
  std::shared_ptr<pool_submission> sub;
  std::size_t first = 0, count = 0;
  std::shared_ptr<writer> args;  // packed items + large ranges, kept for a resend
  int attempts = 0;              // workers lost while running it
  std::string worker;            // while in flight
};

class task_queue {
 public:
  void add(std::shared_ptr<pool_submission> sub);

  /// Produces chunks until `window` tasks wait (or the input runs out, or a sink wants no more).
  /// A chunk over `max_message_bytes` fails its items here: a worker would drop the connection.
  void feed(std::size_t window, std::size_t max_message_bytes);
  std::size_t waiting() const { return queue_.size(); }

  /// The next task to send, skipping those whose caller already has an error; null when none.
  pool_task* next();
  pool_task take_next();
  /// A task that could not be sent goes back to the front.
  void put_back(pool_task t) { queue_.push_front(std::move(t)); }
  void sent(pool_task t, const std::string& worker);

  /// The results of task `task_id` from `worker` (named `worker_name` in failures); a duplicate
  /// (the task was resent and the first result won) is dropped.
  void on_results(std::uint64_t task_id, const std::string& worker, const std::string& worker_name, multipart&& payload);

  /// Items of the tasks in `held`.
  std::size_t items_in(const std::deque<std::uint64_t>& held) const;
  /// A worker died holding `held`, in the order sent. The oldest is the one it was running: only
  /// that one is charged an attempt; the others were waiting behind it (prefetch) and go back to
  /// the front as they were. A task out of attempts (or whose retries are off) fails.
  void on_worker_lost(const std::deque<std::uint64_t>& held, const std::string& worker_name, bool pool_retry,
                      int max_attempts);

  /// Every item not yet delivered fails with `e` at its own position: those in tasks queued or
  /// running, and (through the sink) those the input has not produced yet.
  void fail_all(std::exception_ptr e);

  /// Nothing queued, in flight, or still to be produced.
  bool drained() const;
  /// Anything submitted and not yet finished.
  bool busy() const { return !queue_.empty() || !inflight_.empty() || !feeding_.empty(); }

  std::size_t queued_items() const;
  std::size_t running_items() const;
  std::size_t done() const { return done_; }
  std::size_t retried() const { return retried_; }

 private:
  // Inline: they run once per item, in on_results' loop.
  void deliver_result(pool_submission& sub, std::size_t index, message&& m) {
    ++done_;
    --sub.outstanding;
    if (!sub.finished) sub.sink->on_result(index, std::move(m));
    finish_if_done(sub);
  }
  void deliver_error(pool_submission& sub, std::size_t index, std::exception_ptr e) {
    ++done_;
    --sub.outstanding;
    if (!sub.finished) sub.sink->on_error(index, std::move(e));
    finish_if_done(sub);
  }
  void finish_if_done(pool_submission& sub) {
    if (sub.finished || !sub.input_done || sub.outstanding) return;
    sub.finished = true;
    sub.sink->on_finished();
  }
  void fail_items(pool_task& t, std::exception_ptr e);

  std::list<std::shared_ptr<pool_submission>> feeding_;  // whose input has not run out
  std::deque<pool_task> queue_;
  std::map<std::uint64_t, pool_task> inflight_;
  std::uint64_t next_task_ = 1;
  std::size_t done_ = 0, retried_ = 0;
};

}  // namespace fiber::detail
