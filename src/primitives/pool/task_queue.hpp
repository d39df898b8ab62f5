// The pool's work: the tasks waiting for a worker and those in flight, the results that come back
// for them, and what becomes of a task whose worker died or ran past its deadline. Its parts make
// the chunks (chunk_feeder) and hand items to their callers (item_delivery). Which worker runs a
// task is the master's choice (pool/master.cpp); this queue never sees a process. On fiber's loop
// thread.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "primitives/pool/chunk_feeder.hpp"
#include "primitives/pool/item_delivery.hpp"
#include "primitives/pool/pool_submission.hpp"
#include "primitives/pool/task_losses.hpp"

namespace fiber::detail {

class task_queue {
 public:
  task_queue() = default;
  task_queue(const task_queue&) = delete;  // its parts point back at it
  task_queue& operator=(const task_queue&) = delete;

  /// Where calls are added (add, shared_limits) and their chunks made.
  chunk_feeder& feeder() { return feeder_; }
  /// Produces chunks until `window` tasks wait (or the input runs out, or a sink wants no more).
  /// A chunk over `max_message_bytes` fails its items here: a worker would drop the connection.
  void feed(std::size_t window, std::size_t max_message_bytes) {
    feeder_.feed(queue_, window, max_message_bytes, next_task_);
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
  /// `skip`: the message's first items are of items delivered already (a worker taken up from
  /// the last master of a durable run sends what it holds from its task's start).
  void on_results(std::uint64_t task_id, const std::string& worker, const std::string& worker_name, multipart&& payload,
                  bool final = true, std::size_t items = 0, std::size_t skip = 0);
  const pool_task* in_flight(std::uint64_t task_id) const;

  /// Items of the tasks in `held`.
  std::size_t items_in(const std::deque<std::uint64_t>& held) const;
  /// A worker died holding `held`, in the order sent: its tasks leave the flight, and what
  /// task_losses makes of them goes back to the front of the queue.
  void on_worker_lost(const std::deque<std::uint64_t>& held, const worker_end& end, bool pool_retry, int max_attempts,
                      bool retry_memory = false);
  /// The item running on a worker holding `held` passed its call's timeout: as on_worker_lost,
  /// by task_losses' rule for deadlines. The worker is to be killed.
  void on_timed_out(const std::deque<std::uint64_t>& held, const std::string& worker_name, int max_attempts);

  /// Every item not yet delivered fails with `e` at its own position: those in tasks queued or
  /// running, and (through the sink) those the input has not produced yet.
  void fail_all(const std::exception_ptr& e);
  /// As fail_all, for `sink`'s call alone; returns the ids of its tasks that were in flight.
  std::vector<std::uint64_t> cancel(pool_sink& sink, const std::exception_ptr& e) {
    return fail_where([&](const pool_submission& s) { return s.sink.get() == &sink; }, e);
  }
  /// As fail_all, for the submissions `which` picks; returns the ids of their tasks in flight.
  std::vector<std::uint64_t> fail_where(const std::function<bool(const pool_submission&)>& which, const std::exception_ptr& e);
  /// The tasks of `held` still in flight go back to the front of the queue, uncharged.
  void put_back_held(const std::deque<std::uint64_t>& held);

  /// Nothing queued, in flight, or still to be produced.
  bool drained() const;
  /// Anything submitted and not yet finished.
  bool busy() const { return !queue_.empty() || !inflight_.empty() || feeder_.reading(); }

  std::size_t queued_items() const;
  std::size_t running_items() const;
  std::size_t done() const { return delivery_.done(); }
  /// What becomes of a lost worker's tasks (its count of the items retried).
  const task_losses& losses() const noexcept { return losses_; }

 private:
  /// The caller has its answer (a map failed): `sub`'s queued tasks and its input not yet read
  /// are dropped; its tasks in flight end as they would.
  void drop_queued(pool_submission& sub);
  void requeue_front(std::vector<pool_task>& tasks);
  /// The tasks of `held` still in flight, out of the flight, in the order of `held`.
  std::vector<pool_task> take_held(const std::deque<std::uint64_t>& held);

  item_delivery delivery_{[this](pool_submission& sub) { drop_queued(sub); }};
  chunk_feeder feeder_{delivery_};
  std::deque<pool_task> queue_;
  std::map<std::uint64_t, pool_task> inflight_;
  std::uint64_t next_task_ = 1;
  task_losses losses_{delivery_, next_task_};
};

}  // namespace fiber::detail
