// What every engine's run of a child shares, and the one `job` over it. A run records its pid,
// its end and who waits for it (to end, to run after a queue, to be identified); an engine's run
// derives from engine_run and writes only its own parts: how it creates, signals and reaps the
// child on its engine, and when it calls report_end(), mark_running() and mark_identified().
// engine_job is the job every engine hands out (docker, kubernetes, slurm's batch jobs and steps).
#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.hpp"
#include "fiber/detail/unique_function.hpp"

namespace fiber::detail {

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
  /// Its job is gone (engine_job's end): kill and reap, unless the run has a gentler way to let
  /// go (one still waiting in a queue of fiber's own is dropped from it, unstarted).
  virtual void forget() noexcept { kill_and_reap(); }
  virtual std::string placement() const { return {}; }
  virtual bool never_fits() const noexcept { return false; }
  virtual void expect_exit() {}
  /// The child's own word for its pid; an engine whose pid is another namespace's ignores it.
  virtual void reported_pid(int p) { pid = p; }
  virtual std::string exit_detail() const { return detail_; }
  /// Why the engine has not started it yet (job::pending_reason); on the engine's loop.
  virtual std::string pending_reason() const { return {}; }

  std::atomic<int> pid{0};

  // ---- on the engine's loop
  bool finished() const noexcept { return finished_; }
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
  unique_function<void(int)> on_exit_;
  std::vector<unique_function<void()>> on_running_, on_identified_;
  unique_function<void(const std::string&)> on_pending_;
  std::string pending_said_;
};

/// The job of an engine's run: each call goes to the run; destroying it lets the run go (forget).
class engine_job final : public job {
 public:
  explicit engine_job(std::shared_ptr<engine_run> run) : run_(std::move(run)) {}
  ~engine_job() override { run_->forget(); }

  int pid() const noexcept override { return run_->pid.load(); }
  void on_exit(unique_function<void(int)> f) override { run_->on_exit(std::move(f)); }
  void signal(int sig) noexcept override { run_->signal(sig); }
  void kill_and_reap() noexcept override { run_->kill_and_reap(); }
  std::string exit_detail() const override { return run_->exit_detail(); }
  std::string placement() const override { return run_->placement(); }
  bool never_fits() const noexcept override { return run_->never_fits(); }
  void when_identified(unique_function<void()> f) override { run_->when_identified(std::move(f)); }
  void when_running(unique_function<void()> f) override { run_->when_running(std::move(f)); }
  void reported_pid(int p) override { run_->reported_pid(p); }
  void expect_exit() override { run_->expect_exit(); }
  std::string pending_reason() const override { return run_->pending_reason(); }
  void on_pending(unique_function<void(const std::string&)> f) override { run_->on_pending(std::move(f)); }

 private:
  std::shared_ptr<engine_run> run_;
};

}  // namespace fiber::detail
