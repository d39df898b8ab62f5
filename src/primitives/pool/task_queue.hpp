// The pool's work: submissions that produce chunks of items (tasks), the tasks waiting for a
// worker, the tasks in flight, and the delivery of their results to the submissions' sinks.
// Which worker runs a task is the master's choice (pool/master.cpp); this queue never sees a
// process. On fiber's loop thread.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <vector>

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
};

class task_queue {
 public:
  void add(std::shared_ptr<pool_submission> sub);

  /// Produces chunks until `window` tasks wait (or the input runs out, or a sink wants no more).
  /// A chunk over `max_message_bytes` fails its items here: a worker would drop the connection.
  void feed(std::size_t window, std::size_t max_message_bytes);
  /// The fiber::shared objects the chunks refer to: their bound together (shared_cache_bytes),
  /// and whether workers map them from this host's memory (else each goes in a task's message,
  /// and counts against max_message_bytes).
  void shared_limits(std::uint64_t bound, bool host_memory) {
    shared_bound_ = bound;
    shared_in_host_memory_ = host_memory;
  }
  std::size_t waiting() const { return queue_.size(); }

  /// The next task to send, skipping those whose caller already has an error; null when none.
  pool_task* next();
  pool_task take_next();
  /// A task that could not be sent goes back to the front.
  void put_back(pool_task t) { queue_.push_front(std::move(t)); }
  void sent(pool_task t, const std::string& worker);

  /// The results of task `task_id`'s next `items` items (`final`: of all those left) from
  /// `worker` (named `worker_name` in failures); results from a worker that no longer holds the
  /// task (it was resent and the first result won) are dropped.
  void on_results(std::uint64_t task_id, const std::string& worker, const std::string& worker_name, multipart&& payload,
                  bool final = true, std::size_t items = 0);
  const pool_task* in_flight(std::uint64_t task_id) const;

  /// Items of the tasks in `held`.
  std::size_t items_in(const std::deque<std::uint64_t>& held) const;
  /// A worker died holding `held`, in the order sent. The oldest is the one it was running, and
  /// of its items the first not yet reported is charged an attempt. Out of attempts, it fails
  /// alone; else it runs again alone (a task of its own, on a worker given nothing else, so that
  /// the next death is surely its), and the rest of its chunk runs again uncharged, in pieces
  /// that report item by item at first. Without retries, every item of that chunk not yet
  /// reported fails (each may have run). The tasks waiting behind it (prefetch) go back to the
  /// front as they were.
  void on_worker_lost(const std::deque<std::uint64_t>& held, const worker_end& end, bool pool_retry, int max_attempts);
  /// The item running on a worker holding `held` passed its submission's timeout: it fails with
  /// errc::timed_out (or is charged an attempt and runs again, if its submission says so), and
  /// the rest go back to the queue. The worker is to be killed.
  void on_timed_out(const std::deque<std::uint64_t>& held, const std::string& worker_name, int max_attempts);

  /// Every item not yet delivered fails with `e` at its own position: those in tasks queued or
  /// running, and (through the sink) those the input has not produced yet.
  void fail_all(std::exception_ptr e);
  /// As fail_all, for `sink`'s call alone; returns the ids of its tasks that were in flight.
  std::vector<std::uint64_t> cancel(pool_sink& sink, std::exception_ptr e) {
    return fail_where([&](const pool_submission& s) { return s.sink.get() == &sink; }, std::move(e));
  }
  /// As fail_all, for the submissions `which` picks; returns the ids of their tasks in flight.
  std::vector<std::uint64_t> fail_where(const std::function<bool(const pool_submission&)>& which, std::exception_ptr e);
  /// The tasks of `held` still in flight go back to the front of the queue, uncharged.
  void put_back_held(const std::deque<std::uint64_t>& held);

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
    if (!sub.finished && sub.sink->answered()) drop_queued(sub);
    finish_if_done(sub);
  }
  /// The caller has its answer (a map failed): `sub`'s queued tasks and its input not yet read
  /// are dropped; its tasks in flight end as they would.
  void drop_queued(pool_submission& sub);
  void finish_if_done(pool_submission& sub) {
    if (sub.finished || !sub.input_done || sub.outstanding) return;
    sub.finished = true;
    sub.sink->on_finished();
  }
  void fail_items(pool_task& t, std::exception_ptr e);
  /// `t`'s first item fails with `e`; false when it was the task's last.
  bool fail_first(pool_task& t, std::exception_ptr e);
  void requeue_front(std::vector<pool_task>& tasks);
  /// The tasks of `held` still in flight, out of the flight, in the order of `held`.
  std::vector<pool_task> take_held(const std::deque<std::uint64_t>& held);
  /// The running task `t`, its first item charged: that item alone, then the rest (if any), in
  /// pieces of a quarter of its submission's chunksize.
  void split_charged(pool_task&& t, std::vector<pool_task>& out);

  std::list<std::shared_ptr<pool_submission>> feeding_;  // whose input has not run out
  std::deque<pool_task> queue_;
  std::map<std::uint64_t, pool_task> inflight_;
  std::uint64_t next_task_ = 1;
  std::size_t done_ = 0, retried_ = 0;
  std::uint64_t shared_bound_ = 0;
  bool shared_in_host_memory_ = false;
};

}  // namespace fiber::detail
