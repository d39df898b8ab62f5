// When a master's sbatch submissions go. Slurm's controller starts pending jobs in scheduling
// passes; a pass that an event triggers (a submission, a job's end) looks at no more than
// default_queue_depth jobs (100 unless the cluster sets it), counting each element of a job array,
// and the rest wait for the next event or for the full pass minutes apart. A pool of 128 workers
// submitted as one array had about 100 running after a second and the last 28 only 10-20 s later;
// submissions sent close together share one pass as well. So a group larger than a pass is
// submitted as arrays of at most a pass each, and each array goes once a pass has looked at the
// elements sent before it: its own submission then triggers a pass that reaches all of it.
#pragma once
#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <string_view>
#include <vector>

namespace fiber::detail::slurm {

/// Slurm's default_queue_depth when the cluster does not set it.
inline constexpr std::size_t default_pass_depth = 100;
/// How long a held submission waits for a pass to reach the ones sent before it. A busy
/// controller's event passes may be spent on other users' jobs ahead in priority; the elements then
/// wait for the full pass anyway, and holding ours back would only add to that.
inline constexpr std::chrono::milliseconds longest_hold{5000};

/// How many jobs one event-triggered pass looks at, from `scontrol show config`'s output:
/// default_queue_depth, lowered by sched_max_job_start or partition_job_depth where the cluster
/// sets one (a pass then starts or tests no more). default_pass_depth when none is set or the
/// output holds no SchedulerParameters line.
std::size_t pass_depth_in(std::string_view show_config);

/// The submissions held back until a pass has looked at the ones before them. `Submission` is
/// anything with `size()` (its number of jobs: an array's elements); which of its jobs a pass has
/// looked at is for the caller to say (`unseen`), from what squeue last showed.
template <class Submission>
class submit_pacing {
 public:
  using clock = std::chrono::steady_clock;
  using pointer = std::shared_ptr<Submission>;

  explicit submit_pacing(std::size_t depth = default_pass_depth) : depth_(depth ? depth : 1) {}

  std::size_t depth() const noexcept { return depth_; }
  bool holding() const noexcept { return !held_.empty(); }

  /// Adds `s` behind the submissions held, then returns those that may go now, in order.
  /// `unseen(const Submission&)` counts the jobs of a submission sent earlier that no pass has
  /// looked at yet.
  template <class Unseen>
  std::vector<pointer> offer(pointer s, Unseen&& unseen, clock::time_point now) {
    held_.push_back(std::move(s));
    return release(unseen, now);
  }

  /// The held submissions that may go now (after each squeue, say): one goes when a pass has looked
  /// at every job sent before it, or when those it would share a pass with are no more than a pass
  /// holds, or when the last one went longest_hold ago.
  template <class Unseen>
  std::vector<pointer> release(Unseen&& unseen, clock::time_point now) {
    std::size_t waiting = 0;
    std::erase_if(sent_, [&](const pointer& s) {
      std::size_t n = unseen(*s);
      waiting += n;
      return n == 0;
    });
    std::vector<pointer> go;
    while (!held_.empty()) {
      auto& next = held_.front();
      bool fits = waiting + next->size() <= depth_;
      if (!fits && waiting > 0 && now - last_sent_ < longest_hold) break;
      waiting += next->size();
      last_sent_ = now;
      sent_.push_back(next);
      go.push_back(std::move(next));
      held_.pop_front();
    }
    return go;
  }

 private:
  std::size_t depth_;
  std::deque<pointer> held_;
  std::vector<pointer> sent_;  // sent, with some job no pass has looked at
  clock::time_point last_sent_{};
};

}  // namespace fiber::detail::slurm
