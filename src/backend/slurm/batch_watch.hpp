// What a master's batch jobs share (batch_watch: the sbatch submissions, one squeue poll for all,
// the output follower) and one job's life (batch_run). batch_jobs.cpp hands the runs out;
// batch_watch.cpp watches them.
#pragma once
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "backend/command.hpp"
#include "backend/engine_run.hpp"
#include "backend/side_thread.hpp"
#include "backend/slurm/poll_cadence.hpp"
#include "backend/slurm/slurm_cli.hpp"
#include "backend/slurm/submit_pacing.hpp"
#include "core/log.hpp"
#include "fiber/config.hpp"

namespace fiber::detail::slurm {


using std::chrono::milliseconds;
using clock = std::chrono::steady_clock;

inline constexpr milliseconds follow_period{250};
/// Exit code of a child Slurm refused or never ran.
inline constexpr int not_started = 255;
inline constexpr int submit_attempts = 3;
/// Slurm's default MaxArraySize is 1001 (indexes 0-1000).
inline constexpr std::size_t max_array_size = 1000;
/// The squeue cadence while a submission is held until a pass has looked at those before it (a
/// pass comes within batch_sched_delay, 3 s, of a submission).
inline constexpr milliseconds hold_poll{200};

/// A submission's answer (the job id, empty when refused), readable from a thread that blocks the
/// loop (kill_and_reap).
using pending_submit = one_answer<std::string>;

/// One file of a job's output, read from where the last read stopped.
struct followed_file {
  std::string path;
  std::uintmax_t offset = 0;

  /// Appends what was written since the last call to `out`.
  void read_new(std::string& out) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    char buf[65536];
    for (;;) {
      auto n = ::pread(fd, buf, sizeof buf, static_cast<off_t>(offset));
      if (n <= 0) break;
      out.append(buf, static_cast<std::size_t>(n));
      offset += static_cast<std::uintmax_t>(n);
    }
    ::close(fd);
  }
};

/// Writes all of `bytes` to `fd` (a child's output passed on), giving up on an error.
void write_all(int fd, std::string_view bytes);
/// Cancels the jobs `ids` now, waiting for scancel; a failure is logged.
void cancel_now(const std::vector<std::string>& ids);

class batch_run;

/// What all batch jobs of one master share: the command thread, the squeue poll and the output
/// follower.
class batch_watch : public std::enable_shared_from_this<batch_watch> {
 public:
  batch_watch(asio::io_context& context, const fiber::config& settings, std::string master_mark, std::string output_dir)
      : io(context), cfg(settings), master(std::move(master_mark)), dir(std::move(output_dir)), poll_timer_(context),
        follow_timer_(context) {
    if (settings.slurm_jobs_per_pass > 0) pacing_.emplace(static_cast<std::size_t>(settings.slurm_jobs_per_pass));
  }

  asio::io_context& io;
  fiber::config cfg;
  std::string master, dir;
  std::unique_ptr<command_thread> commands = std::make_unique<command_thread>(io);
  bool shut_down = false;

  void watch(const std::string& id, const std::shared_ptr<batch_run>& run) {
    watched_[id] = run;
    poll_after(first_poll);
  }
  void unwatch(const std::string& id) { watched_.erase(id); }
  /// Job `id` of an earlier master was taken up: it ends with this master's jobs.
  void adopted(const std::string& id) { adopted_.insert(id); }
  /// Whether a child's link tells this master of its end (direct links and hubs do; a ZeroMQ
  /// router does not, and squeue alone then tells of a worker killed without a word).
  bool links_tell_of_ends() const noexcept { return cfg.remote_transport != "zeromq"; }
  /// Looks again within `delay` (sooner than planned, never later).
  void poll_after(milliseconds delay);
  void follow(const std::shared_ptr<batch_run>& run) {
    followed_.push_back(run);
    if (!following_) arm_follow();
  }

  /// Submits `run`'s child now or, with the other children spawned in the same turn of the loop
  /// that ask for the same, as one job array.
  void submit_soon(std::shared_ptr<batch_run> run, const spawn_spec& spec);

  /// Ends the watch: the command in flight finishes, and every job of this master still queued
  /// or running is cancelled.
  void shutdown();

 private:
  void poll_now();
  /// squeue's answer for `asked`, run at `asked_at`.
  void polled(const std::vector<std::string>& asked, clock::time_point asked_at, const command_result& r);
  void arm_follow();
  struct submission;
  void flush();
  /// Learns how many jobs a scheduling pass reaches (submit_pacing), then flushes.
  void ask_pass_depth();
  /// The jobs of `sub` that no scheduling pass has looked at yet.
  static std::size_t unseen_jobs(const submission& sub);
  /// Sends the held submissions whose turn has come.
  void release_held();
  /// Hands `sub`'s runs their answer and output files, then submits it.
  void send(const std::shared_ptr<submission>& sub);
  void submit(const std::shared_ptr<submission>& sub, int attempt);
  void find_then_resubmit(const std::shared_ptr<submission>& sub, int attempt);

  struct waiting_spawn {
    std::shared_ptr<batch_run> run;
    spawn_spec spec;
  };
  std::vector<waiting_spawn> waiting_;  // spawned in this turn of the loop, not submitted yet
  std::map<std::string, std::weak_ptr<batch_run>> watched_;
  std::set<std::string> adopted_;
  std::vector<std::weak_ptr<batch_run>> followed_;
  asio::steady_timer poll_timer_, follow_timer_;
  bool poll_armed_ = false, poll_in_flight_ = false, following_ = false;
  clock::time_point poll_due_{};
  poll_cadence cadence_;
  clock::time_point last_failure_log_{};
  // Made once a pass's depth is known (slurm_jobs_per_pass, or the controller's answer).
  std::optional<submit_pacing<submission>> pacing_;
  bool asking_depth_ = false;
};

class batch_run final : public engine_run, public std::enable_shared_from_this<batch_run> {
 public:
  enum class stage { submitting, pending, running, ended };

  // A job may wait in Slurm's queue (when_running); its pid is what the child reports.
  batch_run(std::shared_ptr<batch_watch> w, std::string process)
      : engine_run({.queued = true, .identified_later = false}), watch(std::move(w)), process_name(std::move(process)) {}

  void kill_and_reap() noexcept override;  // below, beside cancel_now
  std::string handle() const override { return id; }
  /// Its worker said it ends, or its link dropped: squeue may show the job running a while yet,
  /// and the looks until it shows the end must come soon, not a quiet job's ten minutes apart.
  void expect_exit() override {
    exit_expected = true;
    watch->poll_after(soon_poll);
  }
  /// The worker's hello: from now on its link tells of its end (see poll_cadence).
  void reported_pid(int p) override {
    pid = p;
    linked = true;
  }
  /// Runs with its worker linked by a link that tells of its end, and was sent no signal: a job
  /// told to end (or to do anything else) may end any moment, in a state only squeue tells (a
  /// worker that ignores SIGTERM and is cancelled after its grace keeps its link until Slurm has
  /// ended it).
  bool quiet() const noexcept {
    return at == stage::running && linked && !exit_expected && last_signal == 0 && watch->links_tell_of_ends();
  }
  std::string pending_reason() const override {
    if (at == stage::submitting) return "being submitted to Slurm";
    if (at != stage::pending) return {};
    // "None": Slurm has not looked at it yet.
    return "Slurm job " + id + " pends" + (last_reason.empty() || last_reason == "None" ? "" : ": " + last_reason);
  }
  std::optional<struct planned_end> planned_end() const override { return at == stage::ended ? std::nullopt : end_plan; }

  /// Which submission carries this run: `index` is its element in a job array, -1 when it is a
  /// job of its own; `output` the path of its output files without .out/.err.
  void bind(std::shared_ptr<pending_submit> s, int element, const std::string& output) {
    submitted = std::move(s);
    index = element;
    out.path = output + ".out";
    err.path = output + ".err";
  }

  std::shared_ptr<batch_watch> watch;
  std::string process_name;
  std::shared_ptr<pending_submit> submitted;  // shared by the elements of an array; null until bound
  int index = -1;
  std::string id;
  stage at = stage::submitting;
  int code = 0, pending_signal = 0, last_signal = 0;
  std::uint64_t memory_limit_mb = 0;  // its --mem; 0: none
  bool giving_up = false;  // cancelled because it cannot run; ends once the cancel is done
  std::atomic<bool> linked{false};  // its worker said hello (reported_pid)
  bool exit_expected = false;        // its worker said it ends, or its link dropped (expect_exit)
  std::atomic<bool> reaped{false};  // kill_and_reap cancelled it already (it waited for scancel)
  std::string detail, stderr_tail, last_reason, node;
  clock::time_point pending_since = clock::now();
  std::optional<struct planned_end> end_plan;  // its time limit's end: from its submission, then as squeue says
  followed_file out, err;

  /// This run's Slurm id, given the id sbatch answered.
  std::string id_in(const std::string& job) const { return index < 0 ? job : job + "_" + std::to_string(index); }

  void accepted(const std::string& job) {
    id = id_in(job);
    logf(log_level::debug, process_name, ": Slurm job ", id);
    // Killed while being submitted: cancelled now, unless kill_and_reap did (a second scancel,
    // started after the caller heard the child was gone, would outlive its terminate()).
    if (at == stage::ended) return reaped ? void() : cancel();
    at = stage::pending;
    pending_since = clock::now();
    watch->watch(id, shared_from_this());
    if (pending_signal) signal(pending_signal);
  }

  /// What the latest squeue, run at `asked_at`, said of this job; null when it no longer lists it.
  void update(const job_row* row, clock::time_point asked_at) {
    if (at == stage::ended || at == stage::submitting) return;
    if (!row)
      return end(not_started, "Slurm no longer lists its job " + id + " and its end was not seen");
    if (ended_state(row->state)) return ended(*row);
    // squeue counted the time left after it was asked: the end it gives is never too late. A
    // pending job's is its whole limit, from then: its worker may connect before the next poll
    // says it runs, and it cannot have started before this one.
    if (row->time_left && row->time_limit) end_plan = {asked_at + *row->time_left, *row->time_limit};
    if (row->state == "PENDING") return pending(*row);
    if (at == stage::pending) {
      at = stage::running;
      node = row->nodes;
      logf(log_level::debug, process_name, ": Slurm job ", id, " runs on ", node);
      watch->follow(shared_from_this());
      mark_running();
    }
  }

  void pending(const job_row& row) {
    if (row.reason != last_reason) {
      last_reason = row.reason;
      pending_changed();
      logf(log_level::debug, process_name, ": Slurm job ", id, " pends: ", row.reason);
    }
    if (hopeless_reason(row.reason))
      return cancel_then_end("Slurm cannot run its job " + id + ": it pends with reason " + row.reason +
                                  ", which will not resolve itself (a request no node or partition can satisfy, "
                                  "or a partition or account limit); change the request (cpu, memory_mb, gpu, "
                                  "slurm_partition, slurm_constraint, slurm_time_limit) or ask the cluster's admins");
    auto limit = watch->cfg.slurm_pending_timeout_ms;
    if (limit > 0 && clock::now() - pending_since > milliseconds(limit))
      return cancel_then_end("its Slurm job " + id + " pended longer than slurm_pending_timeout_ms (" +
                             std::to_string(limit) + " ms), last with reason " + row.reason);
  }

  void ended(const job_row& row) {
    follow_once();
    code = exit_code_of(row.wait_status);
    // A job cancelled before its script's end was recorded reports status 0: it was killed.
    if (row.state == "CANCELLED" && code == 0) code = -(last_signal ? last_signal : SIGKILL);
    logf(log_level::debug, process_name, ": Slurm job ", id, " ended ", row.state, " status ", row.wait_status);
    auto why = ended_detail(row.state);
    // Killed for its memory limit: slurmstepd said so in its stderr (with the step's use and
    // limit: OverMemoryKill), or Slurm's state does (a cgroup's OOM kill).
    auto memory = code == -SIGKILL ? memory_stop_in(stderr_tail) : std::nullopt;
    if (!memory && row.state == "OUT_OF_MEMORY" && memory_limit_mb) memory = memory_stop{memory_limit_mb, 0};
    if (memory) {
      stopped_for_memory(*memory);
      why = memory_stop_text(*memory) + ": Slurm killed its job " + id;
    }
    if (code != 0 && !stderr_tail.empty()) {
      auto tail = stderr_tail;
      while (!tail.empty() && tail.back() == '\n') tail.pop_back();
      why += (why.empty() ? "" : "; ") + std::string("its last output: ") + tail;
    }
    if (code == 127 && stderr_tail.empty())
      why += (why.empty() ? "" : "; ") + std::string("the program could not be run on node ") + row.nodes +
             " (is it on a file system the nodes share?)";
    end(code, why);
  }

  /// Reads what the job wrote since the last look and passes it on as a local child's output would.
  void follow_once() {
    std::string o, e;
    out.read_new(o);
    err.read_new(e);
    if (!o.empty()) write_all(1, o);
    if (!e.empty()) {
      write_all(2, e);
      stderr_tail += e;
      if (stderr_tail.size() > 2048) stderr_tail.erase(0, stderr_tail.size() - 2048);
    }
  }

  void end(int exit_code, std::string why) {
    if (at == stage::ended) return;
    at = stage::ended;
    code = exit_code;
    detail = why;
    if (!id.empty()) watch->unwatch(id);
    std::error_code ignored;
    std::filesystem::remove(out.path, ignored);
    std::filesystem::remove(err.path, ignored);
    report_end(exit_code, std::move(why));
  }

  void cancel(int sig = 0) {
    if (id.empty()) return;
    std::vector<std::string> args{"scancel"};
    // Running: the signal goes to the batch script too (it exec'd the worker). Queued: only a
    // plain cancel applies.
    if (sig && sig != SIGKILL && at == stage::running) {
      args.push_back("--signal=" + std::to_string(sig));
      args.emplace_back("--full");
    }
    args.push_back(id);
    watch->commands->run(std::move(args), {}, [w = std::weak_ptr(watch)](const command_result& r) {
      if (!r.ok()) logf(log_level::debug, "scancel: ", r.problem());  // it may have ended already
      if (auto still = w.lock()) still->poll_after(soon_poll);
    });
  }

  /// Gives up on a job Slurm cannot run: the start fails once Slurm has taken the job out of its
  /// queue, so nothing of it is left when the caller hears of the failure.
  void cancel_then_end(std::string why) {
    if (giving_up) return;
    giving_up = true;
    watch->unwatch(id);
    watch->commands->run({"scancel", id}, {}, [self = shared_from_this(), why = std::move(why)](const command_result& r) mutable {
      if (!r.ok()) logf(log_level::debug, "scancel: ", r.problem());
      self->end(not_started, std::move(why));
    });
  }

  void signal(int sig) noexcept override {
    if (at != stage::ended) last_signal = sig;
    switch (at) {
      case stage::submitting:
        if (pending_signal != SIGKILL) pending_signal = sig;
        return;
      case stage::pending:
        if (sig == SIGKILL || sig == SIGTERM || sig == SIGINT) {
          pending_signal = sig;
          cancel();
        }
        return;
      case stage::running: return cancel(sig);
      case stage::ended: return;
    }
  }
};

}  // namespace fiber::detail::slurm
