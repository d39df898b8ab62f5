// A pool worker's notice of its planned end: the signal an engine sends ahead of its kill. SIGTERM
// comes from `docker stop`, from a pod's deletion or eviction (its grace period) and from a local
// `kill`; SIGURG from Slurm's --signal ahead of a job's or a step's time limit (ignored by
// default, so a child that does not listen is not ended by it). From the notice on, the worker
// takes no new work and hands back what it holds; the main thread asks given() between items
// and before each message, and leaves at the first it can. This part's own thread (the watch)
// covers the item that runs when the notice comes: one that will not fit in the notice (its
// estimate says so, or it still runs when the notice is nearly out) is handed back by ending
// the process with exit_drained, which tells the master that nothing the worker held was its
// items' doing, before the engine's kill could make it look like a crash.
//
// A SIGTERM from the worker's parent (the master, or the host hub that forked it) is its pool
// stopping it, and in a Slurm job a SIGTERM is a cancellation (the pool's own, scancel, a
// preemption): it takes its default action, as before.
#pragma once
#include <signal.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>

#include "fiber/detail/unique_function.hpp"

namespace fiber::detail {

class drain_notice {
 public:
  using clock = std::chrono::steady_clock;

  /// What the watch does about the item running at the notice.
  struct verdict {
    bool hand_back_now = false;       // it will not fit: hand it back at once
    clock::duration wait_until_ago{};  // else: hand it back if it still runs this long after the notice
  };
  /// With `notice` between the notice and the kill, an item whose run takes `estimate` (0:
  /// unknown), the notice `since` ago: the decision, leaving `margin` to hand back and exit.
  static verdict decide(clock::duration notice, clock::duration estimate, clock::duration since = {});
  /// The time kept at the end of a notice to hand back and exit: a tenth of it, at most 2 s.
  static clock::duration margin(clock::duration notice);

  /// Arms the notice for this process, once (later calls return the first). `notice`: how long
  /// the engine leaves between its signal and its kill; `parent`: the pid whose SIGTERM is the
  /// pool's own stop (0: none); `term_is_notice`: false where SIGTERM is never a notice (in a
  /// Slurm job, whose notice is SIGURG and whose SIGTERM is a cancellation, the pool's own
  /// included); `wake` runs on the watch's thread at the notice (a post to the worker's loop, so
  /// that an idle worker sees it).
  static drain_notice& arm(std::chrono::milliseconds notice, pid_t parent, bool term_is_notice,
                           unique_function<void()> wake);

  /// The notice came (relaxed: read between items).
  bool given() const noexcept { return given_.load(std::memory_order_relaxed); }
  /// The signal that gave it (SIGTERM, SIGURG); 0 before.
  int signal_number() const noexcept { return signal_.load(std::memory_order_relaxed); }

  /// On the main thread: a task starts, its items estimated at `estimate` each (0: learn).
  void task_begins(std::chrono::milliseconds estimate) noexcept;
  /// ... one of its items finished (a plain store: the watch only reads it).
  void item_done() noexcept { in_task_.store(in_task_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }
  /// ... it ended: its items teach the estimate of the next ones.
  void task_ends() noexcept;
  /// What one item takes, by this worker's items so far (0 before any finished).
  clock::duration learned() const noexcept;

  drain_notice(const drain_notice&) = delete;
  drain_notice& operator=(const drain_notice&) = delete;

 private:
  drain_notice() = default;
  static void on_signal(int sig, siginfo_t* info, void*) noexcept;
  void watch();
  void judge_running_item();

  std::chrono::milliseconds notice_{0};
  unique_function<void()> wake_;
  int pipe_[2] = {-1, -1};  // the handler's byte to the watch
  std::atomic<bool> given_{false};
  std::atomic<int> signal_{0};
  std::atomic<std::int64_t> given_at_ns_{0};  // CLOCK_MONOTONIC, as steady_clock here
  // The running task: since when, its estimate, its items done; the items before it.
  std::atomic<std::int64_t> task_began_ns_{0};  // 0: none runs
  std::atomic<std::int64_t> estimate_ns_{0};
  std::atomic<std::uint64_t> in_task_{0};
  std::atomic<std::int64_t> busy_ns_{0};
  std::atomic<std::uint64_t> items_{0};
};

}  // namespace fiber::detail
