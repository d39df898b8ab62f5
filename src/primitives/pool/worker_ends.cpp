#include "primitives/pool/worker_ends.hpp"

#include <csignal>

#include "core/flight_recorder.hpp"
#include "core/log.hpp"
#include "core/worker_env.hpp"
#include "primitives/child_process.hpp"
#include "primitives/pool/outside_deaths.hpp"
#include "primitives/pool/pool_view.hpp"
#include "primitives/pool/task_queue.hpp"
#include "runtime/runtime.hpp"

namespace fiber::detail {

// It said so, or it left with exit_drained, which only it gives itself (the pool's own stops end
// a worker by signal). The pool may have taken its end for a lost connection first: a task sent
// to it as it left.
bool handed_back(bool draining, const child_ending& ending) { return draining || ending.exit_code() == exit_drained; }
bool handed_back(const pool_worker& w) { return handed_back(w.draining, w.proc->ending()); }

std::string how_it_ended(bool draining, const child_ending& ending, const std::string& why_ended) {
  if (handed_back(draining, ending)) return "drained: it had notice of its planned end and handed its work back";
  if (auto memory = ending.memory_stopped()) return memory_stop_text(*memory);
  auto code = ending.exit_code();
  std::string status = code ? exit_text(*code) : "";
  if (why_ended.empty()) return status.empty() ? "its end was reported without a status" : status;
  // The pool ended it with SIGKILL (or SIGTERM first); another status means it had ended by itself first (a
  // container's dropped connection is often seen before its own end is reported).
  if (code && *code != -SIGKILL && *code != -SIGTERM) return status;
  return why_ended + (status.empty() ? "" : " (" + status + ")");
}
std::string how_it_ended(const pool_worker& w) { return how_it_ended(w.draining, w.proc->ending(), w.why_ended); }

worker_ends::verdict worker_ends::ended(const pool_worker& w, bool pool_ending) {
  bool drained = handed_back(w);
  bool shut_down = rt_.is_shut_down();
  bool lost = !drained && !w.leaving && !pool_ending;
  auto how = how_it_ended(w);
  auto memory = w.proc->ending().memory_stopped();
  if (drained) {
    ++drained_;
    logf(log_level::info, w.proc->name(), " (pid ", w.proc->pid(), ") had notice of its planned end and handed back ",
         tasks_.items_in(w.tasks), " item(s); they run elsewhere, uncharged");
  } else if (lost || (!w.tasks.empty() && !shut_down)) {
    // In items, as stats().retried counts them: a task is a chunk of items.
    logf(log_level::warn, w.proc->name(), " (pid ", w.proc->pid(), ") ended with code ",
         w.proc->ending().exit_code().value_or(0), " holding ", tasks_.items_in(w.tasks), " item(s) in ", w.tasks.size(),
         " chunk(s)");
    if (lost && w.connected) ++lost_;
    if (memory) ++memory_exceeded_;
    view_.note_failure(w.proc->name() + " ended (" + how + ") holding " + std::to_string(tasks_.items_in(w.tasks)) +
                       " item(s)");
  }
  if (auto& rec = rt_.observer().recorder(); rec.on()) {
    auto name = w.recorded_as ? w.recorded_as : rec.name(w.proc->name());  // it never connected
    for (auto task : w.tasks) rec.record(record_kind::task_lost, name, pool_id_, task);
    rec.record(record_kind::worker_down, name, pool_id_, static_cast<std::uint64_t>(w.proc->ending().exit_code().value_or(0)),
               (lost ? 1 : 0) | (memory ? 2 : 0), how);
  }
  verdict v{.end = {w.proc->name(), how, memory,
                    ended_from_outside(w.proc->ending().exit_code(), memory.has_value(),
                                       !w.why_ended.empty() || !w.proc->ending().ended_by().empty())}};
  v.end.drained = drained;
  // An exit_drained with no notice said first is bounded as deaths from outside are: an item that
  // exits with that code itself must not run again for ever.
  v.bounded = (lost && v.end.outside) || (drained && !w.draining);
  return v;
}

}  // namespace fiber::detail
