// What every run of a child shares, and the one `job` over it. A run records its pid, its end and
// who waits for it (to end, to run after a queue, to be identified); each kind of run derives from
// engine_run and writes only its own parts: how it creates, signals and reaps the child, and when
// it calls report_end(), mark_running() and mark_identified(). Every backend hands out a `job`
// over its run: local processes, Docker containers, Kubernetes pods, Slurm's batch jobs and steps,
// a nested master's children started by the top (relayed_run), a host hub's forks.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fiber/detail/unique_function.hpp"

namespace fiber::detail {

/// A child stopped for going past its memory limit, by its engine (an OOM kill inside the limit
/// fiber gave it) or by fiber's own watch.
struct memory_stop {
  std::uint64_t limit_mb = 0;  // the limit it went past
  std::uint64_t peak_mb = 0;   // its peak resident memory as last seen; 0: the engine did not say
};

/// "stopped for going past its memory limit (256 MiB; peak 301 MiB)": how a child's end reads.
inline std::string memory_stop_text(const memory_stop& s) {
  return "stopped for going past its memory limit (" + std::to_string(s.limit_mb) + " MiB" +
         (s.peak_mb ? "; peak " + std::to_string(s.peak_mb) + " MiB" : std::string()) + ")";
}

/// When the engine will end a child that runs (a Slurm job's time limit), as last heard from it.
struct planned_end {
  std::chrono::steady_clock::time_point at;  // on this host's clock; never later than the engine's
  std::chrono::seconds limit{0};             // the whole time the engine gives it
};

class engine_run {
 public:
  struct shape {
    bool queued = false;             // an engine queue may hold it before it runs (when_running waits)
    bool identified_later = false;  // its pid comes from the engine after the start (when_identified waits)
  };
  explicit engine_run(shape s) : running_(!s.queued), identified_(!s.identified_later) {}
  virtual ~engine_run() = default;

  // ---- the engine's own parts, as job's hooks of the same names say
  virtual void signal(int sig) noexcept = 0;
  virtual void kill_and_reap() noexcept = 0;
  /// Its job is gone (the job's end): kill and reap, unless the run has a gentler way to let
  /// go (one still waiting in a queue of fiber's own is dropped from it, unstarted).
  virtual void forget() noexcept { kill_and_reap(); }
  virtual std::string placement() const { return {}; }
  /// Whether the child is stopped (SIGSTOP, traced), where the engine can tell (job::is_stopped).
  virtual bool is_stopped() const noexcept { return false; }
  virtual bool never_fits() const noexcept { return false; }
  /// The child said it ends, or its link closed: an engine that polls for ends looks soon.
  virtual void expect_exit() {}
  /// The child's own word for its pid; an engine whose pid is another namespace's ignores it.
  virtual void reported_pid(int p) { pid = p; }
  virtual std::string exit_detail() const { return detail_; }
  /// The engine's name for the run (job::handle): its pid where the engine has no other.
  virtual std::string handle() const { return std::to_string(pid.load()); }
  /// Why the engine has not started it yet (job::pending_reason); on the engine's loop.
  virtual std::string pending_reason() const { return {}; }
  /// When the engine will end it (job::planned_end); on the engine's loop.
  virtual std::optional<struct planned_end> planned_end() const { return std::nullopt; }

  std::atomic<int> pid{0};

  // ---- on the engine's loop
  bool finished() const noexcept { return finished_; }
  const std::optional<memory_stop>& memory_stopped() const noexcept { return memory_stop_; }
  void on_exit(unique_function<void(int)> f) {
    if (finished_) return f(code_);
    on_exit_ = std::move(f);
  }
  void when_running(unique_function<void()> f) {
    if (running_) return f();
    if (!finished_) on_running_.push_back(std::move(f));
  }
  void when_identified(unique_function<void()> f) {
    if (identified_) return f();
    on_identified_.push_back(std::move(f));
  }
  /// `f(reason)` each time pending_reason() changes while it waits (job::on_pending).
  void on_pending(unique_function<void(const std::string&)> f) { on_pending_ = std::move(f); }

 protected:
  /// The child ended with `code` (-N: killed by signal N), `detail` saying why where the engine
  /// knows more; the first call counts. Whoever waits for its pid hears now, whoever waits for
  /// it to run never will, and whoever waits for its end is told last.
  void report_end(int code, std::string detail = {}) {
    if (finished_) return;
    finished_ = true;
    code_ = code;
    detail_ = std::move(detail);
    on_running_.clear();
    mark_identified();
    if (auto f = std::move(on_exit_)) {
      on_exit_ = nullptr;
      f(code_);
    }
  }
  /// Killed by the caller, who reports the end itself: nobody waiting is told.
  void forget_waiters() {
    on_exit_ = nullptr;
    on_running_.clear();
    on_identified_.clear();
  }
  void mark_running() { run_all(running_, on_running_); }
  /// The engine said something new about why it waits (pending_reason() changed): told once.
  void pending_changed() {
    auto why = pending_reason();
    if (why.empty() || why == pending_said_) return;
    pending_said_ = why;
    if (on_pending_) on_pending_(why);
  }
  void mark_identified() { run_all(identified_, on_identified_); }
  /// Before report_end: the child was stopped for memory (the first word counts).
  void stopped_for_memory(memory_stop s) {
    if (!memory_stop_) memory_stop_ = s;
  }

 private:
  static void run_all(bool& flag, std::vector<unique_function<void()>>& waiting) {
    flag = true;
    auto now = std::move(waiting);
    waiting.clear();
    for (auto& f : now) f();
  }
  bool finished_ = false, running_, identified_;
  int code_ = 0;
  std::string detail_;
  std::optional<memory_stop> memory_stop_;
  unique_function<void(int)> on_exit_;
  std::vector<unique_function<void()>> on_running_, on_identified_;
  unique_function<void(const std::string&)> on_pending_;
  std::string pending_said_;
};

/// A started child: the job of its run. Each call goes to the run; the job's end lets the run go
/// (engine_run::forget: kill and reap, or drop one still waiting in a queue of fiber's own).
class job final {
 public:
  explicit job(std::shared_ptr<engine_run> run) : run_(std::move(run)) {}
  ~job() { run_->forget(); }
  job(const job&) = delete;
  job& operator=(const job&) = delete;

  /// The child's pid on its host (0 while an engine has not reported it yet).
  int pid() const noexcept { return run_->pid.load(); }
  /// Calls `f(code)` on the io_context once the child has ended: code >= 0 is its exit code, -N
  /// means killed by signal N.
  void on_exit(unique_function<void(int)> f) { run_->on_exit(std::move(f)); }
  void signal(int sig) noexcept { run_->signal(sig); }
  /// Kills and reaps right now (used when the master goes away).
  void kill_and_reap() noexcept { run_->kill_and_reap(); }
  /// Why the child ended, when the backend knows more than its exit code (the engine refused to
  /// start it; the last lines it wrote to stderr). Empty otherwise.
  std::string exit_detail() const { return run_->exit_detail(); }
  /// Set once it ended, when it was stopped for going past its memory limit (by its engine or by
  /// fiber's watch); on the io_context's thread.
  const std::optional<memory_stop>& memory_stopped() const noexcept { return run_->memory_stopped(); }
  /// Where the engine put the child, in words, once it runs (the local backend: the cpus it is
  /// pinned to and its GPUs); empty where the engine does not say.
  std::string placement() const { return run_->placement(); }
  /// True while the child is stopped (SIGSTOP, traced), where the backend can tell; one that
  /// cannot says false, and its children are watched by heartbeats instead.
  bool is_stopped() const noexcept { return run_->is_stopped(); }
  /// True when the backend learned only by trying that no node can run this child (an engine
  /// without the device driver its GPU needs): its start fails with errc::unsatisfiable.
  bool never_fits() const noexcept { return run_->never_fits(); }
  /// Calls `f` on the io_context once pid() is known (at once where it always is).
  void when_identified(unique_function<void()> f) { run_->when_identified(std::move(f)); }
  /// Calls `f` on the io_context once the child runs, queue waits over (at once where there is no
  /// queue): its handshake deadline counts from then. Never, for a child that ended unstarted.
  void when_running(unique_function<void()> f) { run_->when_running(std::move(f)); }
  /// The engine's name for the child (a local process's pid, a container's id, a pod's name, a
  /// Slurm job's id), by which a master taking a durable run up adopts it (backend::adopt).
  std::string handle() const { return run_->handle(); }
  /// The pid the child reported itself, for a backend that cannot ask its engine.
  void reported_pid(int p) { run_->reported_pid(p); }
  /// The child said it is done and is about to exit: a backend that polls for the end looks soon.
  void expect_exit() { run_->expect_exit(); }
  /// While the engine has not started it: why, in the engine's words (a Slurm job's pending
  /// reason, a pod's scheduling message or container's waiting reason). Empty when it is not
  /// waiting or the engine says nothing. On the io_context's thread.
  std::string pending_reason() const { return run_->pending_reason(); }
  /// When its engine will end it, where the engine sets an end (a Slurm job's time limit; none
  /// elsewhere, or before the engine said). For a child still queued, the earliest end it could
  /// have (its whole limit from the engine's last word), as it may run before the engine says so.
  /// On the io_context's thread.
  std::optional<struct planned_end> planned_end() const { return run_->planned_end(); }
  /// Calls `f(reason)` on the io_context each time that reason changes (nothing where the engine
  /// never holds a child back).
  void on_pending(unique_function<void(const std::string&)> f) { run_->on_pending(std::move(f)); }

 private:
  std::shared_ptr<engine_run> run_;
};

}  // namespace fiber::detail
