// How often a master asks squeue about its batch jobs. A cluster's controller serves every user:
// a master that asked every few seconds for the whole of a long map was the most frequent caller
// of all the systems measured beside it (docs/performance.md, "The cluster path").
#pragma once
#include <algorithm>
#include <chrono>

namespace fiber::detail::slurm {

using std::chrono::milliseconds;

inline constexpr milliseconds first_poll{100}, soon_poll{50}, longest_poll{5000};
/// The wait between two squeue calls once every job runs with its worker linked: all squeue has
/// left to tell then is a time limit an admin changed, and a shortened one is announced to the
/// workers by their own notice signal anyway.
inline constexpr milliseconds quiet_poll{600000};

/// The wait before each squeue. Short after a change; doubling up to longest_poll while some job
/// waits to run or its worker has not linked yet (that it starts, or fails first, is news to find
/// out soon); quiet_poll at once when every job is quiet (running, its worker linked, sent no
/// signal, its end not announced): a job's end then reaches the master through its worker's link
/// first, which asks for a look soon (`ask`) and makes the job not quiet until squeue shows it.
/// What is left for squeue to tell a quiet master is a time limit an admin changed.
class poll_cadence {
 public:
  /// A look asked for within `delay` (a job submitted, a worker's link dropped). While a squeue is
  /// `in_flight`, its answer may predate what prompted the ask: the look after it comes within
  /// `delay` whatever the answer says.
  void ask(milliseconds delay, bool in_flight) noexcept {
    wait_ = std::min(wait_, delay);
    if (in_flight) asked_ = std::min(asked_, delay);
  }

  /// The wait after a squeue answered, having found some job `changed` or not, and every job
  /// `quiet` or not.
  milliseconds answered(bool changed, bool quiet) noexcept {
    milliseconds next = changed ? first_poll : quiet ? quiet_poll : std::min(wait_ * 2, longest_poll);
    return settle(next);
  }

  /// The wait after a squeue that failed (the controller busy or down): doubling up to longest_poll.
  milliseconds failed() noexcept { return settle(std::min(wait_ * 2, longest_poll)); }

  milliseconds wait() const noexcept { return wait_; }

 private:
  milliseconds settle(milliseconds next) noexcept {
    wait_ = std::min(next, asked_);
    asked_ = milliseconds::max();
    return wait_;
  }
  milliseconds wait_ = first_poll;
  milliseconds asked_ = milliseconds::max();  // the soonest look asked for while a squeue was in flight
};

}  // namespace fiber::detail::slurm
