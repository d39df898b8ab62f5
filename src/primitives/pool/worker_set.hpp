// The pool's workers: how many there are to be, their needs and their replacement when the needs
// rise, their handshakes, retiring them and their ends. Its parts: how one is started and what a
// failed start means (worker_starter), what each holds and which takes the next chunk
// (worker_load), the probe that finds a worker which stopped (SIGSTOP) while holding tasks
// (stop_probe). Everyone else sees a worker const and tells this set or its load what happened
// (took, finished, reported), so a worker's state changes only here. On fiber's loop thread.
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
#include "primitives/pool/worker_load.hpp"
#include "primitives/pool/worker_needs.hpp"
#include "primitives/pool/worker_starter.hpp"

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

  /// Starts the probe and the first workers, after `first` (which may adopt workers that run
  /// already). `owner` keeps this set alive in callbacks.
  void start(std::weak_ptr<void> owner, unique_function<void()> first = nullptr);
  /// Starts `proc` (made by starter().make; it may take up a process that runs already) as one of
  /// the set's workers: its routing id, or empty when it could not start. `counted`: a failure
  /// counts towards giving up on starts (a process taken up that is gone says nothing of the
  /// next start). After start().
  std::string start_worker(const std::shared_ptr<child_process>& proc, bool counted);
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

  /// How many workers there are to be, and are, as the stats and the view count them.
  struct census {
    int target = 0;
    std::size_t started = 0;    // made since the pool began
    std::size_t live = 0;       // not leaving
    std::size_t connected = 0;  // past their handshake, not leaving
    std::size_t starting = 0;   // not past their handshake, not leaving
    std::size_t current = 0;    // not leaving, started with the needs new ones get now
    bool empty = true;          // none at all, leaving ones included
  };
  census count() const;

  /// Fails with the backend's words when no node could run a worker that also has `needs`.
  void check_capacity(const meta& needs) const;
  /// What new workers start with, and what a function's needs are compared by.
  const worker_needs& needs() const noexcept { return needs_; }
  /// Workers with the joined needs start; each one that connects retires one started with less
  /// (it finishes what it holds). Until then the workers with less go on with the work they
  /// cover, and if the new ones cannot start, they stay (events::raised_needs_refused).
  void raise_needs(const meta& needs);

  /// How workers start: whether they cannot (stopped), and new work trying again (try_again).
  worker_starter& starter() noexcept { return starter_; }

  const pool_worker* find(const std::string& rid) const;
  /// A worker's handshake, with its name's number in the recording: false when it had been told
  /// to leave already (it is sent stop now).
  bool on_ready(const pool_worker& w, int credit, std::uint32_t recorded_as);
  /// What each worker holds, and which takes the next chunk (least_loaded takes needs filled in:
  /// needs().full(...)).
  worker_load& load() noexcept { return load_; }
  /// `w` finished task `task` (`items` of them), and has `credit` more: it may take more, and
  /// with maxtasksperchild it retires by itself after so many.
  void finished(const pool_worker& w, std::uint64_t task, std::uint64_t items, int credit, worker_load::maybe_now now);
  /// `w` leaves: told to stop (it finishes what it holds, its replacement starts at its end),
  /// or, `drained`, it had notice of its planned end and hands back what it holds by itself: it
  /// takes nothing more, and its replacement starts now.
  void retire(const pool_worker& w, bool drained = false);
  /// A task could not be sent to `w`: unreachable (its connection dropped) unless it is leaving.
  void unreachable(const pool_worker& w, std::error_code ec);
  void retire_all();
  /// Kills `w` for `why` (it holds nothing the pool still waits for) and starts its replacement.
  void end_now(const pool_worker& w, std::string why);
  template <class F>
  void for_each(F&& f) const {
    for (auto& [rid, w] : workers_) f(w);
  }

 private:
  /// Retires workers started with less than the needs, as many as the connected ones beyond
  /// the target.
  void retire_superseded();
  /// A worker started with `started_with` could not start.
  void on_start_failed(const meta& started_with, std::error_code ec, const std::string& what,
                       std::optional<int> exit_code = std::nullopt);
  void on_ended(const std::string& rid);

  runtime& rt_;
  std::uint64_t pool_id_;
  const pool_options& options_;
  events on_;
  std::weak_ptr<void> owner_;
  int target_ = 0;
  worker_needs needs_;
  bool superseded_ = false;  // workers started with less than needs_ may be left (after a raise)
  bool closed_ = false;
  worker_starter starter_{rt_, pool_id_, options_};
  std::map<std::string, pool_worker> workers_;
  worker_load load_;
  stop_probe probe_{rt_, pool_id_, workers_};
};

}  // namespace fiber::detail
