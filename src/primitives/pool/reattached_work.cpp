#include "primitives/pool/reattached_work.hpp"

#include "core/log.hpp"
#include "primitives/child_process.hpp"
#include "primitives/pool/wire.hpp"

namespace fiber::detail {

bool reattached_work::claim_front() {
  if (claims_.empty()) return false;
  auto* next = tasks_.next();
  if (!next) return false;
  auto rid = claims_.claim(static_cast<std::uint32_t>(next->sub->recorded_as), next->first, next->id, next->identity);
  if (!rid) return false;
  auto* w = workers_.find(*rid);
  if (!w) return false;  // it ended: the chunk goes to the queue's workers
  auto t = tasks_.take_next();
  auto id = t.id;
  (void)workers_.load().took(*w, id, false, std::nullopt);
  tasks_.sent(std::move(t), *rid);
  for (auto& m : claims_.waiting(id)) pending_.emplace_back(*rid, std::move(m));
  return true;
}

void reattached_work::read_pending() {
  auto now = std::move(pending_);
  pending_.clear();
  for (auto& [rid, m] : now) {
    auto* w = workers_.find(rid);
    if (!w || m.empty()) continue;
    auto h = parse_header(m[0]);
    multipart payload;
    for (std::size_t i = 1; i < m.size(); ++i) payload.push_back(std::move(m[i]));
    if (h) read(*w, *h, payload);
  }
}

bool reattached_work::on_results(const pool_worker& w, const header& h, multipart& payload) {
  if (!claims_.speaks_of_old_tasks(w.rid)) return false;
  read(w, h, payload);
  return true;
}

void reattached_work::read(const pool_worker& w, const header& h, multipart& payload) {
  bool final = h.type == pool_kind::result;
  auto made = claims_.task_of(w.rid, h.request);
  const pool_task* t = made ? tasks_.in_flight(made) : nullptr;
  std::optional<std::pair<std::size_t, std::size_t>> left;
  if (t && t->worker == w.rid) left = std::make_pair(t->begin, t->end);
  auto r = claims_.read(w.rid, h.request, final, final ? 0 : h.aux, left);
  logf(log_level::debug, w.proc->name(), ": its last master's task ", h.request, (final ? " (final)" : ""), " read as ",
       int(r.what), " for task ", r.task, " skipping ", r.skip);
  switch (r.what) {
    case reattach_claims::reading::unknown:
    case reattach_claims::reading::drop: return;
    case reattach_claims::reading::wait: {
      multipart m;
      m.push_back(make_header(h.type, h.channel, h.request, h.aux, h.flags));
      for (auto& f : payload) m.push_back(std::move(f));
      claims_.keep(w.rid, h.request, std::move(m));
      return;
    }
    case reattach_claims::reading::gap: {
      // Its results begin after an item nobody answered: the task runs again, from the queue.
      logf(log_level::info, w.proc->name(), "'s results of a chunk begin past its first item without one; it runs again");
      workers_.load().finished(w, r.task, 0, 1, std::nullopt);
      tasks_.put_back_held({r.task});
      return;
    }
    case reattach_claims::reading::deliver: break;
  }
  auto begin = left->first, end = left->second;
  std::size_t count = final ? end - begin : h.aux - r.skip;
  bool last = final || begin + count == end;
  tasks_.on_results(r.task, w.rid, w.proc->name(), std::move(payload), last, count, r.skip);
  // Its credit came back with the task's end: the task was given to it without its asking.
  if (last) workers_.finished(w, r.task, count, 1, std::nullopt);
}

}  // namespace fiber::detail
