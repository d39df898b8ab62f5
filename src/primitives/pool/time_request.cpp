#include "primitives/pool/time_request.hpp"

#include <vector>

#include "core/log.hpp"
#include "fiber/error.hpp"
#include "primitives/child_process.hpp"
#include "primitives/pool/pool_submission.hpp"
#include "primitives/pool/task_queue.hpp"
#include "primitives/pool/worker_set.hpp"

namespace fiber::detail {

namespace {
/// Whole seconds: a worker's time rounded down, an item's estimate up, so that the two never read
/// as equal when one is short of the other.
std::string in_seconds(std::chrono::steady_clock::duration d) {
  return std::to_string(std::chrono::floor<std::chrono::seconds>(d).count()) + " s";
}
std::string in_seconds_up(std::chrono::milliseconds d) {
  return std::to_string(std::chrono::ceil<std::chrono::seconds>(d).count()) + " s";
}
}  // namespace

time_request::fit time_request::judge(std::optional<clock::duration> left, std::optional<clock::duration> lifetime,
                                      bool holds_tasks, std::chrono::milliseconds estimate) {
  if (estimate.count() <= 0 || !left || *left >= estimate) return fit::fits;
  if (lifetime && *lifetime < estimate) return fit::never;
  return holds_tasks ? fit::finishing : fit::retire;
}

std::optional<time_request::clock::duration> time_request::time_left(const pool_worker& w, clock::time_point now) {
  auto* job = w.proc ? w.proc->running_job() : nullptr;
  if (!job) return std::nullopt;
  auto end = job->planned_end();
  if (!end) return std::nullopt;
  return end->at - now;
}

std::string time_request::too_long(const std::string& worker, clock::duration lifetime, std::chrono::milliseconds estimate) {
  return "an item of this call takes " + in_seconds_up(estimate) + " (task_estimate), longer than a new worker has before " +
         "its engine ends it: " + worker + " had " + in_seconds(lifetime) +
         " at its start (its time limit, less the time it took to start). None could finish an item; raise the workers' time limit " +
         "(on Slurm, config key slurm_time_limit) or lower task_estimate";
}

bool time_request::short_of_time(const pool_submission& sub, clock::time_point now) {
  if (sub.estimate.count() <= 0) return false;
  std::vector<const pool_worker*> retiring;
  std::optional<std::string> never;
  workers_.for_each([&](const pool_worker& w) {
    if (!w.connected || w.leaving || never) return;
    switch (judge(time_left(w, now), w.lifetime, !w.tasks.empty(), sub.estimate)) {
      case fit::never: never = too_long(w.proc->name(), *w.lifetime, sub.estimate); break;
      case fit::retire: retiring.push_back(&w); break;
      case fit::fits:
      case fit::finishing: break;
    }
  });
  if (never) {
    logf(log_level::warn, "pool ", pool_id_, ": ", *never);
    auto e = std::make_exception_ptr(error(errc::unsatisfiable, *never));
    (void)tasks_.fail_where([&](const pool_submission& s) { return &s == &sub; }, e);
    return true;
  }
  for (auto* w : retiring) {
    logf(log_level::info, w->proc->name(), " has ", in_seconds(*time_left(*w, now)),
         " left before its engine ends it, less than an item takes (task_estimate ", in_seconds_up(sub.estimate),
         "): it leaves, and its replacement starts now");
    workers_.retire(*w);
  }
  return false;
}

}  // namespace fiber::detail
