// The pool's workers: starting them (at most a few at a time on this host), their needs and
// their replacement when the needs rise, retiring them, and the probe that finds a worker which
// stopped (SIGSTOP) while holding tasks. What a worker holds is the master's business; this set
// only keeps the ids. On fiber's loop thread.
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
#include <vector>

#include <asio/steady_timer.hpp>

#include "fiber/detail/unique_function.hpp"
#include "fiber/meta.hpp"
#include "fiber/pool_options.hpp"

namespace fiber::detail {
class runtime;
class child_process;
class shared_entry;

struct pool_worker {
  std::shared_ptr<child_process> proc;
  std::string rid;  // its routing id: the peer its messages come from
  meta needs;       // what it was started with, as worker_set::full() says it
  bool connected = false;
  bool leaving = false;  // told to stop (close, resize), or retiring (maxtasksperchild)
  int credit = 0;        // chunks it can take now
  int completed = 0;            // chunks, counted with maxtasksperchild only
  std::uint64_t items_done = 0;  // the dashboard's count of the items it finished
  std::deque<std::uint64_t> tasks;  // in the order sent, which is the order it runs them
  bool holds_alone = false;         // it runs a task that must run alone: it gets nothing else
  bool offered = false;             // in worker_set's list of workers that may have credit
  std::chrono::steady_clock::time_point running_since;  // of the item it runs: its last report, or its first task's send
  std::string why_ended;  // when the pool ended it: why (else its exit says)
  std::uint32_t recorded_as = 0;  // its name's number in the flight recorder, once it connected
  std::optional<std::chrono::steady_clock::time_point> stopped_since;  // local: seen stopped (SIGSTOP)
};

class worker_set {
 public:
  struct events {
    /// A worker's process ended (it is no longer in the set).
    unique_function<void(pool_worker&&)> ended;
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
  bool covers(const meta& needs) const { return full(needs_).covers(full(needs)); }
  /// Workers with the joined needs start; each one that connects retires one started with less
  /// (it finishes what it holds). Until then the workers with less go on with the work they
  /// cover, and if the new ones cannot start, they stay (events::raised_needs_refused).
  void raise_needs(const meta& needs);

  /// After workers could not start: new work tries again. False when they could.
  bool try_again();
  bool failed() const { return failed_; }

  pool_worker* find(const std::string& rid);
  /// A worker's handshake: false when it had been told to leave already (it is sent stop now).
  bool on_ready(pool_worker& w, int credit);
  /// A worker finished a chunk; with maxtasksperchild it retires by itself after so many.
  void on_completed(pool_worker& w);
  /// The connected worker with credit that covers `needs` and holds the fewest tasks: chunks
  /// spread over the pool. `alone`: only a worker that holds nothing. Null when none can take
  /// one now.
  pool_worker* least_loaded(const meta& needs, bool alone = false);
  /// `w`'s credit grew (it connected, or gave a chunk's credit back): it is one least_loaded looks
  /// at until its credit runs out.
  void offer(pool_worker& w);
  /// A task could not be sent to `w`: unreachable (its connection dropped) unless it is leaving.
  void unreachable(pool_worker& w, std::error_code ec);
  void retire_all();
  /// Kills `w` for `why` (it holds nothing the pool still waits for) and starts its replacement.
  void end_now(pool_worker& w, std::string why);
  template <class F>
  void for_each(F&& f) {
    for (auto& [rid, w] : workers_) f(w);
  }
  /// Tasks forgotten (the master failed them all).
  void forget_tasks();

  bool empty() const { return workers_.empty(); }
  std::size_t live() const;
  std::size_t connected() const;
  std::size_t started() const { return static_cast<std::size_t>(started_); }

 private:
  /// `needs` with each need left at 0 as the config's default (memory without a limit as the
  /// most there is): what needs are compared by.
  meta full(const meta& needs) const;
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
  void schedule_probe();
  void probe();

  runtime& rt_;
  std::uint64_t pool_id_;
  const pool_options& options_;
  events on_;
  std::weak_ptr<void> owner_;
  int target_ = 0;
  meta needs_;       // what new workers start with
  meta base_needs_;  // what a worker that connected was started with: where a refused raise returns
  bool superseded_ = false;  // workers started with less than needs_ may be left (after a raise)
  int started_ = 0;
  int start_failures_ = 0;  // in a row, not counting workers killed from outside
  static constexpr int max_start_failures = 3;
  bool failed_ = false, closed_ = false;
  std::map<std::string, pool_worker> workers_;
  std::vector<pool_worker*> offered_;  // workers that may have credit (least_loaded)
  std::unique_ptr<asio::steady_timer> probe_timer_;
};

}  // namespace fiber::detail
