#include "primitives/pool/worker_set.hpp"

#include <algorithm>
#include <csignal>
#include <limits>

#include "core/log.hpp"
#include "fiber/error.hpp"
#include "primitives/child_process.hpp"
#include "primitives/pool/memory_budget.hpp"
#include "primitives/pool/wire.hpp"
#include "runtime/runtime.hpp"

namespace fiber::detail {

namespace {
/// Tells `w` to finish what it holds and exit.
void send_stop(runtime& rt, std::uint64_t pool_id, const pool_worker& w) {
  rt.master().send_to_child(w.rid, make_message(pool_kind::stop, {.channel = pool_id}));
}
}  // namespace

worker_set::worker_set(runtime& rt, std::uint64_t pool_id, const pool_options& options, events on)
    : rt_(rt),
      pool_id_(pool_id),
      options_(options),
      on_(std::move(on)),
      target_(*options.processes),
      needs_(options.needs, rt.cfg()) {
  check_pool_memory(target_, needs_.full_now().memory_mb, rt.cfg());
}

void worker_set::start(std::weak_ptr<void> owner, unique_function<void()> first) {
  owner_ = std::move(owner);
  probe_.start(owner_);
  if (first) first();
  top_up();
}

void worker_set::kill_all() {
  closed_ = true;
  std::vector<std::shared_ptr<child_process>> procs;
  procs.reserve(workers_.size());
  for (auto& [rid, w] : workers_) procs.push_back(w.proc);
  for (auto& p : procs) p->kill_now("ended by its pool (terminate)");  // each end erases its worker (on_ended)
  cancel_timers();
}

void worker_set::cancel_timers() noexcept {
  probe_.cancel();
}

void worker_set::top_up(bool work_left) {
  if ((closed_ && !work_left) || starter_.stopped() || rt_.is_shut_down()) return;
  auto c = count();
  auto live_now = c.current, starting_now = c.starting;
  const auto limit = starter_.limit();
  // A worker that cannot be spawned counts towards on_start_failed's limit, which ends this.
  while (static_cast<int>(live_now) < target_ && starting_now < limit && !starter_.stopped()) {
    if (!start_worker(starter_.make(needs_.now()), true).empty()) {
      ++live_now;
      ++starting_now;
    }
  }
}

void worker_set::resize(int target) {
  check_pool_memory(target, needs_.full_now().memory_mb, rt_.cfg());
  target_ = target;
  retire_superseded();
  int excess = static_cast<int>(count().current) - target;
  for (auto& [rid, w] : workers_) {
    if (excess <= 0) break;
    if (w.leaving) continue;
    retire(w);
    --excess;
  }
  top_up();
}

void worker_set::check_capacity(const meta& needs) const {
  // Asked before anything changes: work no node can run fails here, and the pool's workers go
  // on as they were.
  auto spec = spec_for_needs(needs_.now().joined(needs), rt_.cfg());
  check_pool_memory(target_, spec.memory_mb, rt_.cfg());
  spec.name = "a worker of pool " + std::to_string(pool_id_);
  rt_.master().the_backend().check_capacity(spec);
}

void worker_set::raise_needs(const meta& needs) {
  needs_.raise(needs);
  logf(log_level::info, "pool ", pool_id_, ": a function needs cpu=", needs.cpu, " memory_mb=", needs.memory_mb,
       " gpu=", needs.gpu, "; starting workers with that, each retiring one started with less once it connects");
  superseded_ = true;
  top_up();
}

const pool_worker* worker_set::find(const std::string& rid) const {
  auto it = workers_.find(rid);
  return it == workers_.end() ? nullptr : &it->second;
}

bool worker_set::on_ready(const pool_worker& worker, int credit, std::uint32_t recorded_as) {
  auto& w = own(worker);
  w.connected = true;
  w.recorded_as = recorded_as;
  if (auto* job = w.proc->running_job(); job && !w.taken_up)
    if (auto end = job->planned_end()) w.lifetime = end->at - std::chrono::steady_clock::now();
  starter_.start_over();
  if (superseded_ && !w.leaving && needs_.met_by(w.needs)) retire_superseded();  // the raised needs can be met
  if (w.leaving) {  // told to leave before it could be reached
    send_stop(rt_, pool_id_, w);
    return false;
  }
  load_.credit(w, credit);
  top_up();  // the next start, where starts are limited
  return true;
}

void worker_set::finished(const pool_worker& worker, std::uint64_t task, std::uint64_t items, int credit,
                          worker_load::maybe_now now) {
  load_.finished(worker, task, items, credit, now);
  auto& w = own(worker);
  if (options_.maxtasksperchild && ++w.completed >= options_.maxtasksperchild) {
    w.leaving = true;  // it exits by itself now; its replacement can start at once
    top_up();
  }
}

void worker_set::unreachable(const pool_worker& worker, std::error_code ec) {
  auto& w = own(worker);
  load_.no_credit(w);
  if (w.leaving || !w.why_ended.empty()) return;
  // Stopped, or going: its end replaces it.
  // Its connection is gone: it stopped, or it has ended and its end is not reported yet (an
  // engine reports a container's end once it is removed). Either way it is done for.
  logf(log_level::warn, w.proc->name(), " lost its connection (", ec.message(), "): ending it as a lost worker");
  w.why_ended = "it stopped answering";
  // SIGTERM first (SIGKILL after terminate_grace_ms): an engine then reports how its child
  // ended, where a kill at once would not wait for its word (a pod the kernel OOM-killed).
  w.proc->terminate();
}

void worker_set::retire_all() {
  for (auto& [rid, w] : workers_)
    if (!w.leaving) retire(w);
}

void worker_set::end_now(const pool_worker& worker, std::string why) {
  auto& w = own(worker);
  w.leaving = true;  // not lost: its end is the pool's doing
  load_.no_credit(w);
  w.why_ended = std::move(why);
  w.proc->signal(SIGKILL);
  top_up();
}

worker_set::census worker_set::count() const {
  census c{.target = target_, .started = starter_.made(), .empty = workers_.empty()};
  auto has = needs_.full_now();
  for (auto& [rid, w] : workers_) {
    if (w.leaving) continue;
    ++c.live;
    ++(w.connected ? c.connected : c.starting);
    if (w.needs.covers(has)) ++c.current;
  }
  return c;
}


void worker_set::retire_superseded() {
  if (!superseded_) return;
  auto has = needs_.full_now();
  int serving = 0, left = 0;
  for (auto& [rid, w] : workers_)
    if (!w.leaving && (w.connected || !w.needs.covers(has))) ++serving;
  for (auto& [rid, w] : workers_) {
    if (w.leaving || w.needs.covers(has)) continue;
    if (serving > target_) {
      retire(w);
      --serving;
    } else {
      ++left;
    }
  }
  superseded_ = left > 0;
}


std::string worker_set::start_worker(const std::shared_ptr<child_process>& proc, bool counted) {
  unique_function<void(std::error_code, std::string)> done = [owner = owner_, this, proc, needs = needs_.now(),
                                                                counted](std::error_code ec, const std::string& what) {
    auto alive = owner.lock();
    if (!alive || !ec) return;
    // A process taken up that fails its handshake says nothing of the next start.
    if (counted) on_start_failed(needs, ec, what, proc->ending().exit_code());
  };
  try {
    proc->start(done);
  } catch (const error& e) {
    if (counted) on_start_failed(needs_.now(), e.code(), e.reason());
    else logf(log_level::info, "pool ", pool_id_, ": ", e.reason());
    return {};
  }
  auto rid = proc->peer();
  pool_worker w;
  w.proc = proc;
  w.rid = rid;
  w.needs = needs_.full_now();
  w.taken_up = !counted;
  workers_.emplace(rid, std::move(w));
  proc->when_ended([owner = owner_, this, rid] {
    if (auto alive = owner.lock()) on_ended(rid);
  });
  return rid;
}

void worker_set::on_start_failed(const meta& started_with, std::error_code ec, const std::string& what,
                                 std::optional<int> exit_code) {
  auto verdict = starter_.failed(started_with == needs_.now(), ec, what, exit_code);
  if (verdict != worker_starter::verdict::give_up) return;
  if (needs_.pending()) {
    // Workers with raised needs cannot start (an engine without the GPU runtime says so only
    // at the container's start): the work that needed them fails, the others go on with the
    // workers they had, which were never retired for these.
    logf(log_level::warn, "pool ", pool_id_, ": workers with the raised needs cannot start (", what,
         "); the functions that need them fail, the pool keeps its workers");
    auto refused = needs_.refuse();
    starter_.start_over();
    for (auto& [rid, w] : workers_)
      if (!w.leaving && !w.connected && w.needs == refused) {
        w.leaving = true;  // still starting with the refused needs: not waited for
        w.proc->signal(SIGKILL);
      }
    on_.raised_needs_refused(std::make_exception_ptr(error(ec, "pool workers with the needs this function declares cannot start: " + what)));
    top_up();
    return;
  }
  starter_.stop();
  on_.cannot_start(std::make_exception_ptr(error(ec, "pool workers cannot start: " + what)));
}

void worker_set::on_ended(const std::string& rid) {
  auto it = workers_.find(rid);
  if (it == workers_.end()) return;
  load_.forget(it->second);
  auto w = std::move(it->second);
  workers_.erase(it);
  on_.ended(w);
}

void worker_set::retire(const pool_worker& worker, bool drained) {
  auto& w = own(worker);
  w.leaving = true;
  if (!drained) {
    if (w.connected) send_stop(rt_, pool_id_, w);  // else when it connects (on_ready)
    return;
  }
  w.draining = true;
  load_.no_credit(w);
  top_up();
}


}  // namespace fiber::detail
