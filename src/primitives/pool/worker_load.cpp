#include "primitives/pool/worker_load.hpp"

#include <algorithm>
#include <utility>

#include "primitives/pool/time_request.hpp"

namespace fiber::detail {

const pool_worker* worker_load::least_loaded(const meta& needs, bool alone, std::chrono::milliseconds estimate) {
  // Only the workers offered since they last ran out of credit: a scan of every worker for every
  // task was half the master's time at 1,024 workers (envelope_bench).
  pool_worker* best = nullptr;
  // The clock only for a call that asks for time (time_request).
  auto now = estimate.count() ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  for (std::size_t i = 0; i < offered_.size();) {
    auto& w = *offered_[i];
    if (w.leaving || w.credit <= 0) {  // offered again when its credit comes back
      w.offered = false;
      offered_[i] = offered_.back();
      offered_.pop_back();
      continue;
    }
    if (!w.holds_alone && (!alone || w.tasks.empty()) && w.needs.covers(needs) &&
        (!best || w.tasks.size() < best->tasks.size()) &&
        time_request::has_time(w, estimate, now)) {
      best = &w;
      if (w.tasks.empty()) break;  // none holds less
    }
    ++i;
  }
  return best;
}

bool worker_load::took(const pool_worker& worker, std::uint64_t task, bool alone, maybe_now now) {
  auto& w = own(worker);
  --w.credit;
  w.tasks.push_back(task);
  w.holds_alone = alone;
  if (w.tasks.size() != 1) return false;
  if (now) w.running_since = *now;
  return true;
}

void worker_load::finished(const pool_worker& worker, std::uint64_t task, std::uint64_t items, int credit_back,
                           maybe_now now) {
  auto& w = own(worker);
  if (now) w.running_since = *now;
  w.items_done += items;
  std::erase(w.tasks, task);
  if (w.tasks.empty()) w.holds_alone = false;
  credit(w, credit_back);
}

void worker_load::reported(const pool_worker& worker, std::uint64_t items, maybe_now now) {
  auto& w = own(worker);
  w.items_done += items;
  if (now) w.running_since = *now;
}

std::deque<std::uint64_t> worker_load::take_tasks(const pool_worker& w) { return std::exchange(own(w).tasks, {}); }

void worker_load::credit(const pool_worker& worker, int credit) {
  auto& w = own(worker);
  w.credit += credit;
  if (w.offered) return;
  w.offered = true;
  offered_.push_back(&w);
}

void worker_load::no_credit(const pool_worker& w) { own(w).credit = 0; }

void worker_load::forget(const pool_worker& w) {
  if (w.offered) std::erase(offered_, &own(w));
}

}  // namespace fiber::detail
