#include "primitives/pool/late_items.hpp"

#include "core/flight_recorder.hpp"
#include "core/log.hpp"
#include "primitives/child_process.hpp"
#include "runtime/runtime.hpp"

namespace fiber::detail {

late_items::late_items(runtime& rt, std::uint64_t pool_id, const pool_options& options, task_queue& tasks,
                       worker_set& workers, pool_view& view, unique_function<void()> after)
    : rt_(rt),
      pool_id_(pool_id),
      options_(options),
      tasks_(tasks),
      workers_(workers),
      view_(view),
      after_(std::move(after)),
      deadlines_(rt.io(), [this] { return end_late(); }) {}

worker_load::maybe_now late_items::now() const {
  if (!deadlines_.used()) return std::nullopt;
  return clock::now();
}

void late_items::started(const pool_worker& w) {
  if (deadlines_.used()) deadlines_.watch(deadline_of(w, tasks_));
}

std::optional<late_items::clock::time_point> late_items::deadline_of(const pool_worker& w, const task_queue& tasks) {
  if (w.tasks.empty() || w.leaving) return std::nullopt;
  auto* t = tasks.in_flight(w.tasks.front());
  if (!t || !t->sub->timeout.count()) return std::nullopt;
  return w.running_since + t->sub->timeout;
}

late_items::scan_result late_items::scan(const std::vector<const pool_worker*>& workers, const task_queue& tasks,
                                         clock::time_point now) {
  scan_result out;
  for (auto* w : workers) {
    auto when = deadline_of(*w, tasks);
    if (!when) continue;
    if (*when <= now)
      out.late.push_back(w);
    else if (!out.next || *when < *out.next)
      out.next = when;
  }
  return out;
}

std::optional<late_items::clock::time_point> late_items::end_late() {
  if (rt_.is_shut_down()) return std::nullopt;
  std::vector<const pool_worker*> all;
  workers_.for_each([&](const pool_worker& w) { all.push_back(&w); });
  auto due = scan(all, tasks_, clock::now());
  for (auto* w : due.late) {
    logf(log_level::warn, w->proc->name(), " ran an item longer than its task_timeout; killing it");
    // The first task held is the one that ran too long; the others were prefetched behind it and
    // never started: they are lost with the worker (and run again), not timed out.
    for (std::size_t i = 0; i < w->tasks.size(); ++i)
      rt_.observer().recorder().record(i ? record_kind::task_lost : record_kind::task_timed_out, w->recorded_as, pool_id_,
                                       w->tasks[i]);
    view_.note_failure(w->proc->name() + " ran an item longer than its task_timeout and was killed");
    tasks_.on_timed_out(workers_.load().take_tasks(*w), w->proc->name(), options_.max_attempts);
    workers_.end_now(*w, "killed: its item ran longer than task_timeout");
  }
  after_();
  return due.next;
}

}  // namespace fiber::detail
