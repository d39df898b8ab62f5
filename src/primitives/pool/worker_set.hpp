// The pool's workers: starting them (at most a few at a time on this host), their needs and
// their replacement when the needs rise, retiring them, the probe that finds a worker which
// stopped (SIGSTOP) while holding tasks, and every field of each worker: the tasks it holds, its
// credit, its counts. Everyone else sees a worker const and tells this set what happened (took,
// finished, reported), so a worker's state changes in this one class. On fiber's loop thread.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <asio/steady_timer.hpp>

#include "fiber/detail/unique_function.hpp"
#include "fiber/meta.hpp"
#include "fiber/pool_options.hpp"
#include "primitives/pool/pool_worker.hpp"
#include "primitives/pool/stop_probe.hpp"
#include "primitives/pool/worker_needs.hpp"

namespace fiber::detail {
class runtime;
class shared_entry;

class worker_set {
 public:
  struct events {
    /// A worker's process ended (it is no longer in the set).
    unique_function<void(const pool_worker&)> ended;
    /// Workers cannot start (max_start_failures in a row, or a need no node meets).
    unique_function<void(std::exception_ptr)> cannot_start;
    /// Workers with raised needs cannot start: the needs are back to what the running workers
    /// have (covers() says so), and the work that needed more is to fail with `why`.
    unique_function<void(std::exception_ptr why)> raised_needs_refused;
  };
  worker_set(runtime& rt, std::uint64_t pool_id, const pool_options& options, events on);

  /// Starts the probe and the first workers. `owner` keeps this set alive in callbacks.
  void start(std::weak_ptr<void> owner);
  /// No more starts (the pool closed).
  void close() { closed_ = true; }
  /// No more starts, no probe; every worker is killed (each end is reported through `ended`).
  void kill_all();
  void cancel_timers() noexcept;

  /// Starts workers until `target` are there (not counting leaving ones). Once closed, only
  /// replacements while `work_left`: a pool closed with work queued still finishes it.
  void top_up(bool work_left = false);
  /// The target changes; workers beyond it are retired.
  void resize(int target);
  int target() const { return target_; }

  /// Fails with the backend's words when no node could run a worker that also has `needs`.
  void check_capacity(const meta& needs) const;
  /// What new workers start with, and what a function's needs are compared by.
  const worker_needs& needs() const noexcept { return needs_; }
  /// Workers with the joined needs start; each one that connects retires one started with less
  /// (it finishes what it holds). Until then the workers with less go on with the work they
  /// cover, and if the new ones cannot start, they stay (events::raised_needs_refused).
  void raise_needs(const meta& needs);

  /// After workers could not start: new work tries again. False when they could.
  bool try_again();
  bool failed() const { return failed_; }

  const pool_worker* find(const std::string& rid) const;
  /// A worker's handshake, with its name's number in the recording: false when it had been told
  /// to leave already (it is sent stop now).
  bool on_ready(const pool_worker& w, int credit, std::uint32_t recorded_as);
  /// The connected worker with credit that covers `needs` and holds the fewest tasks: chunks
  /// spread over the pool. `alone`: only a worker that holds nothing. Null when none can take
  /// one now.
  const pool_worker* least_loaded(const meta& needs, bool alone = false);
  /// Where a pool times its items (task_timeout), what is said of a worker's item carries the
  /// time it starts (`now`; nullopt where nothing is timed): its first task's send, a result or a
  /// report, each followed by the next item.
  using maybe_now = std::optional<std::chrono::steady_clock::time_point>;
  /// `w` was sent task `task` (`alone`: one that must run by itself); true when it is the only
  /// one it holds, whose item starts now.
  bool took(const pool_worker& w, std::uint64_t task, bool alone, maybe_now now);
  /// `w` finished task `task` (`items` of them), and has `credit` more: it may take more, and
  /// with maxtasksperchild it retires by itself after so many.
  void finished(const pool_worker& w, std::uint64_t task, std::uint64_t items, int credit, maybe_now now);
  /// `w` reported `items` done one by one (a chunk resent after a death).
  void reported(const pool_worker& w, std::uint64_t items, maybe_now now);
  /// The tasks `w` holds, taken from it (the master failed or put them back).
  std::deque<std::uint64_t> take_tasks(const pool_worker& w);
  /// A task could not be sent to `w`: unreachable (its connection dropped) unless it is leaving.
  void unreachable(const pool_worker& w, std::error_code ec);
  void retire_all();
  /// Kills `w` for `why` (it holds nothing the pool still waits for) and starts its replacement.
  void end_now(const pool_worker& w, std::string why);
  template <class F>
  void for_each(F&& f) const {
    for (auto& [rid, w] : workers_) f(w);
  }
  /// Tasks forgotten (the master failed them all).
  void forget_tasks();

  bool empty() const { return workers_.empty(); }
  std::size_t live() const;
  std::size_t connected() const;
  std::size_t started() const { return static_cast<std::size_t>(started_); }

 private:
  /// `w`'s credit grew (it connected, or gave a chunk's credit back): it is one least_loaded looks
  /// at until its credit runs out.
  void offer(pool_worker& w);
  std::size_t starting() const;
  /// Workers not leaving that have the needs new ones start with.
  std::size_t current() const;
  /// Retires workers started with less than the needs, as many as the connected ones beyond
  /// the target.
  void retire_superseded();
  std::size_t start_limit() const;
  bool start_one();
  /// A worker started with `started_with` could not start.
  void on_start_failed(const meta& started_with, std::error_code ec, const std::string& what,
                       std::optional<int> exit_code = std::nullopt);
  void on_ended(const std::string& rid);
  void retire(pool_worker& w);
  void send_stop(pool_worker& w);

  runtime& rt_;
  std::uint64_t pool_id_;
  const pool_options& options_;
  events on_;
  std::weak_ptr<void> owner_;
  int target_ = 0;
  worker_needs needs_;
  bool superseded_ = false;  // workers started with less than needs_ may be left (after a raise)
  int started_ = 0;
  int start_failures_ = 0;  // in a row, not counting workers killed from outside
  static constexpr int max_start_failures = 3;
  bool failed_ = false, closed_ = false;
  std::map<std::string, pool_worker> workers_;
  std::vector<pool_worker*> offered_;  // workers that may have credit (least_loaded)
  stop_probe probe_{rt_, pool_id_, workers_};
};

}  // namespace fiber::detail
