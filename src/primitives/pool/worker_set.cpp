#include "primitives/pool/worker_set.hpp"

#include <algorithm>
#include <csignal>
#include <limits>

#include "core/log.hpp"
#include "fiber/error.hpp"
#include "primitives/child_process.hpp"
#include "primitives/pool/wire.hpp"
#include "runtime/runtime.hpp"

namespace fiber::detail {

namespace {
/// A worker killed from outside (SIGKILL, SIGTERM, SIGINT, SIGHUP) before its handshake says
/// nothing about the next one: it is replaced like any lost worker.
bool killed_from_outside(std::optional<int> exit_code) {
  return exit_code &&
         (*exit_code == -SIGKILL || *exit_code == -SIGTERM || *exit_code == -SIGINT || *exit_code == -SIGHUP);
}
/// Every worker is its set's own: the const its callers see is what keeps them from writing.
pool_worker& own(const pool_worker& w) { return const_cast<pool_worker&>(w); }
}  // namespace

worker_set::worker_set(runtime& rt, std::uint64_t pool_id, const pool_options& options, events on)
    : rt_(rt),
      pool_id_(pool_id),
      options_(options),
      on_(std::move(on)),
      target_(*options.processes),
      needs_(options.needs, rt.cfg()) {}

void worker_set::start(std::weak_ptr<void> owner) {
  owner_ = std::move(owner);
  probe_.start(owner_);
  top_up();
}

void worker_set::kill_all() {
  closed_ = true;
  std::vector<std::shared_ptr<child_process>> procs;
  for (auto& [rid, w] : workers_) procs.push_back(w.proc);
  for (auto& p : procs) p->kill_now("ended by its pool (terminate)");  // each end erases its worker (on_ended)
  cancel_timers();
}

void worker_set::cancel_timers() noexcept {
  probe_.cancel();
}

void worker_set::top_up(bool work_left) {
  if ((closed_ && !work_left) || failed_ || rt_.is_shut_down()) return;
  auto live_now = current(), starting_now = starting();
  const auto limit = start_limit();
  // A worker that cannot be spawned counts towards on_start_failed's limit, which ends this.
  while (static_cast<int>(live_now) < target_ && starting_now < limit && !failed_) {
    if (start_one()) {
      ++live_now;
      ++starting_now;
    }
  }
}

void worker_set::resize(int target) {
  target_ = target;
  retire_superseded();
  int excess = static_cast<int>(current()) - target;
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

bool worker_set::try_again() {
  if (!failed_) return false;
  failed_ = false;
  start_failures_ = 0;
  return true;
}

const pool_worker* worker_set::find(const std::string& rid) const {
  auto it = workers_.find(rid);
  return it == workers_.end() ? nullptr : &it->second;
}

bool worker_set::on_ready(const pool_worker& worker, int credit, std::uint32_t recorded_as) {
  auto& w = own(worker);
  w.connected = true;
  w.recorded_as = recorded_as;
  start_failures_ = 0;
  if (superseded_ && !w.leaving && needs_.met_by(w.needs)) retire_superseded();  // the raised needs can be met
  if (w.leaving) {  // told to leave before it could be reached
    send_stop(w);
    return false;
  }
  w.credit += credit;
  offer(w);
  top_up();  // the next start, where starts are limited
  return true;
}

bool worker_set::took(const pool_worker& worker, std::uint64_t task, bool alone, maybe_now now) {
  auto& w = own(worker);
  --w.credit;
  w.tasks.push_back(task);
  w.holds_alone = alone;
  if (w.tasks.size() != 1) return false;
  if (now) w.running_since = *now;
  return true;
}

std::deque<std::uint64_t> worker_set::take_tasks(const pool_worker& w) { return std::exchange(own(w).tasks, {}); }

void worker_set::reported(const pool_worker& worker, std::uint64_t items, maybe_now now) {
  auto& w = own(worker);
  w.items_done += items;
  if (now) w.running_since = *now;
}

void worker_set::finished(const pool_worker& worker, std::uint64_t task, std::uint64_t items, int credit, maybe_now now) {
  auto& w = own(worker);
  if (now) w.running_since = *now;
  w.items_done += items;
  std::erase(w.tasks, task);
  if (w.tasks.empty()) w.holds_alone = false;
  w.credit += credit;
  offer(w);
  if (options_.maxtasksperchild && ++w.completed >= options_.maxtasksperchild) {
    w.leaving = true;  // it exits by itself now; its replacement can start at once
    top_up();
  }
}

void worker_set::offer(pool_worker& w) {
  if (w.offered) return;
  w.offered = true;
  offered_.push_back(&w);
}

const pool_worker* worker_set::least_loaded(const meta& function_needs, bool alone) {
  // Only the workers offered since they last ran out of credit: a scan of every worker for every
  // task was half the master's time at 1,024 workers (envelope_bench).
  auto needs = needs_.full(function_needs);
  pool_worker* best = nullptr;
  for (std::size_t i = 0; i < offered_.size();) {
    auto& w = *offered_[i];
    if (w.leaving || w.credit <= 0) {  // offered again when its credit comes back
      w.offered = false;
      offered_[i] = offered_.back();
      offered_.pop_back();
      continue;
    }
    if (!w.holds_alone && (!alone || w.tasks.empty()) && w.needs.covers(needs) &&
        (!best || w.tasks.size() < best->tasks.size())) {
      best = &w;
      if (w.tasks.empty()) break;  // none holds less
    }
    ++i;
  }
  return best;
}

void worker_set::unreachable(const pool_worker& worker, std::error_code ec) {
  auto& w = own(worker);
  w.credit = 0;
  if (w.leaving) return;
  // Stopped, or going: its end replaces it.
  // Its connection is gone: it stopped, or it has ended and its end is not reported yet (an
  // engine reports a container's end once it is removed). Either way it is done for.
  logf(log_level::warn, w.proc->name(), " lost its connection (", ec.message(), "): ending it as a lost worker");
  w.why_ended = "it stopped answering";
  w.proc->signal(SIGKILL);
}

void worker_set::retire_all() {
  for (auto& [rid, w] : workers_)
    if (!w.leaving) retire(w);
}

void worker_set::end_now(const pool_worker& worker, std::string why) {
  auto& w = own(worker);
  w.leaving = true;  // not lost: its end is the pool's doing
  w.credit = 0;
  w.why_ended = std::move(why);
  w.proc->signal(SIGKILL);
  top_up();
}

void worker_set::forget_tasks() {
  for (auto& [rid, w] : workers_) w.tasks.clear();
}

std::size_t worker_set::live() const {
  return static_cast<std::size_t>(std::count_if(workers_.begin(), workers_.end(), [](auto& e) { return !e.second.leaving; }));
}

std::size_t worker_set::connected() const {
  return static_cast<std::size_t>(
      std::count_if(workers_.begin(), workers_.end(), [](auto& e) { return e.second.connected && !e.second.leaving; }));
}


std::size_t worker_set::current() const {
  auto has = needs_.full_now();
  return static_cast<std::size_t>(
      std::count_if(workers_.begin(), workers_.end(), [&](auto& e) { return !e.second.leaving && e.second.needs.covers(has); }));
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

std::size_t worker_set::starting() const {
  return static_cast<std::size_t>(
      std::count_if(workers_.begin(), workers_.end(), [](auto& e) { return !e.second.connected && !e.second.leaving; }));
}

/// Local children start at most this many at a time: thousands started at once on a few cores
/// missed their handshake deadline (2,048 on 2 cores: 88 killed by start_timeout_ms). The next
/// start follows each handshake. An engine that queues (docker, slurm) takes every request.
std::size_t worker_set::start_limit() const {
  if (rt_.master().the_backend().name() != "local") return std::numeric_limits<std::size_t>::max();
  return static_cast<std::size_t>(std::max(16, 4 * cpu_count()));
}

/// False when the worker could not even be spawned (on_start_failed counted it).
bool worker_set::start_one() {
  encoded_call call;
  const auto& entry = require_registered(&pool_worker_main);
  call.function_id = entry.id;
  call.function_name = entry.name;
  std::uint64_t init_id = 0;
  std::vector<std::string> init_frames;
  if (options_.initializer) {
    auto& init = options_.initializer->call;
    init_id = init.function_id;
    init_frames.push_back(init.args.head());
    for (auto& b : init.args.blobs()) init_frames.emplace_back(reinterpret_cast<const char*>(b.data), b.size);
  }
  call.args.value(std::make_tuple(pool_id_, options_.prefetch + 1, options_.maxtasksperchild,
                                  static_cast<std::int64_t>(options_.report_interval.count()), init_id, init_frames));
  auto proc = child_process::make(rt_.shared_from_this(), std::move(call), needs_.now());
  // The pool's number in this process (a child's ids carry its channel prefix in the high half).
  proc->set_name("PoolWorker-" + std::to_string(pool_id_ & 0xffffffffu) + "-" + std::to_string(++started_));
  proc->set_owned();
  unique_function<void(std::error_code, std::string)> done = [owner = owner_, this, proc, needs = needs_.now()](std::error_code ec,
                                                                                                       std::string what) {
    auto alive = owner.lock();
    if (!alive || !ec) return;
    on_start_failed(needs, ec, what, proc->ending().exit_code());
  };
  try {
    proc->start(done);
  } catch (const error& e) {
    on_start_failed(needs_.now(), e.code(), e.reason());
    return false;
  }
  auto rid = proc->peer();
  pool_worker w;
  w.proc = proc;
  w.rid = rid;
  w.needs = needs_.full_now();
  workers_.emplace(rid, std::move(w));
  proc->when_ended([owner = owner_, this, rid] {
    if (auto alive = owner.lock()) on_ended(rid);
  });
  return true;
}

void worker_set::on_start_failed(const meta& started_with, std::error_code ec, const std::string& what,
                                 std::optional<int> exit_code) {
  if (killed_from_outside(exit_code)) return;  // on_ended starts its replacement
  // Started with other needs than new workers get now (raised since, or a raise refused since):
  // its failure says nothing about the next start.
  if (!(started_with == needs_.now())) return;
  // A worker that cannot start (binary mismatch, missing executable, an error before its
  // handshake) will not start next time either: fail the work at hand instead of trying
  // forever. New work tries again (try_again). A request no node can meet is not met by the
  // next worker either: fail at once.
  bool hopeless = ec == make_error_code(errc::unsatisfiable);
  if (++start_failures_ < max_start_failures && !hopeless) {
    logf(log_level::warn, "a pool worker could not start (", start_failures_, " in a row): ", what);
    return;
  }
  if (needs_.pending()) {
    // Workers with raised needs cannot start (an engine without the GPU runtime says so only
    // at the container's start): the work that needed them fails, the others go on with the
    // workers they had, which were never retired for these.
    logf(log_level::warn, "pool ", pool_id_, ": workers with the raised needs cannot start (", what,
         "); the functions that need them fail, the pool keeps its workers");
    auto refused = needs_.refuse();
    start_failures_ = 0;
    for (auto& [rid, w] : workers_)
      if (!w.leaving && !w.connected && w.needs == refused) {
        w.leaving = true;  // still starting with the refused needs: not waited for
        w.proc->signal(SIGKILL);
      }
    on_.raised_needs_refused(std::make_exception_ptr(error(ec, "pool workers with the needs this function declares cannot start: " + what)));
    top_up();
    return;
  }
  failed_ = true;
  on_.cannot_start(std::make_exception_ptr(error(ec, "pool workers cannot start: " + what)));
}

void worker_set::on_ended(const std::string& rid) {
  auto it = workers_.find(rid);
  if (it == workers_.end()) return;
  if (it->second.offered) std::erase(offered_, &it->second);
  auto w = std::move(it->second);
  workers_.erase(it);
  on_.ended(w);
}

void worker_set::retire(pool_worker& w) {
  w.leaving = true;
  if (w.connected) send_stop(w);  // else when it connects (on_ready)
}

void worker_set::send_stop(pool_worker& w) {
  rt_.master().send_to_child(w.rid, make_message(pool_kind::stop, {.channel = pool_id_}));
}

}  // namespace fiber::detail
