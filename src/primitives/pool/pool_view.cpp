#include "primitives/pool/pool_view.hpp"

#include <algorithm>

#include "primitives/child_process.hpp"
#include "primitives/pool/task_queue.hpp"
#include "primitives/pool/worker_set.hpp"

namespace fiber::detail {

void pool_view::note_failure(std::string what) {
  failures_.emplace_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - began_).count(), std::move(what));
  if (failures_.size() > failures_kept) failures_.pop_front();
}

boost::json::array pool_view::failures() const {
  boost::json::array out;
  for (auto& [at, what] : failures_) out.push_back(boost::json::object{{"at_s", at}, {"what", what}});
  return out;
}

boost::json::object pool_view::describe(std::uint64_t id, std::string_view state, const pool_stats& s,
                                        worker_set& workers, const task_queue& tasks, bool rows) const {
  boost::json::object out{{"id", id}, {"state", state}, {"target", workers.count().target}};
  out["stats"] = {{"queued", s.queued},   {"running", s.running},           {"done", s.done},
                  {"retried", s.retried}, {"workers_lost", s.workers_lost}, {"workers", s.workers},
                  {"workers_started", s.workers_started}, {"drained", s.drained}};
  out["failures"] = failures();
  if (!rows) return out;
  boost::json::array listed;
  std::size_t total = 0;
  workers.for_each([&](const pool_worker& w) {
    if (++total > workers_listed) return;
    std::string_view what = !w.connected       ? "starting"
                            : w.draining       ? "draining"
                            : w.leaving        ? "leaving"
                            : w.stopped_since  ? "stopped"
                            : !w.tasks.empty() ? "busy"
                                               : "idle";
    boost::json::object o{{"name", w.proc->name()},
                          {"pid", w.proc->pid()},
                          {"state", what},
                          {"items", tasks.items_in(w.tasks)},
                          {"done", w.items_done}};
    if (!w.connected)
      if (auto why = w.proc->pending_reason(); !why.empty()) o["state"] = "waiting", o["pending"] = why;
    listed.push_back(std::move(o));
  });
  out["workers"] = std::move(listed);
  out["workers_total"] = total;
  out["workers_shown"] = std::min(total, workers_listed);
  return out;
}

}  // namespace fiber::detail
