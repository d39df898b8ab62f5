#include "backend/slurm/batch_jobs.hpp"

#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>

#include "backend/command.hpp"
#include "backend/engine_run.hpp"
#include "backend/slurm/slurm_cli.hpp"
#include "fiber/config.hpp"
#include "fiber/error.hpp"
#include "core/log.hpp"

namespace fiber::detail::slurm {
namespace {

using std::chrono::milliseconds;
using clock = std::chrono::steady_clock;

constexpr milliseconds first_poll{100}, soon_poll{50}, longest_poll{5000}, follow_period{250};
/// Exit code of a child Slurm refused or never ran.
constexpr int not_started = 255;
constexpr int submit_attempts = 3;
/// Slurm's default MaxArraySize is 1001 (indexes 0-1000).
constexpr std::size_t max_array_size = 1000;

/// A submission's answer, readable from a thread that blocks the loop (kill_and_reap).
struct pending_submit {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::string id;

  void answer(std::string job_id) {
    {
      std::lock_guard lock(m);
      done = true;
      id = std::move(job_id);
    }
    cv.notify_all();
  }
  std::string wait() {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return done; });
    return id;
  }
};

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

void write_all(int fd, std::string_view bytes) {
  for (std::size_t done = 0; done < bytes.size();) {
    auto n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

class batch_run;

/// What all batch jobs of one master share: the command thread, the squeue poll and the output
/// follower.
class batch_watch : public std::enable_shared_from_this<batch_watch> {
 public:
  batch_watch(asio::io_context& io, const fiber::config& cfg, std::string master, std::string dir)
      : io(io), cfg(cfg), master(std::move(master)), dir(std::move(dir)), poll_timer_(io), follow_timer_(io) {}

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
  void polled(const std::vector<std::string>& asked, const command_result& r);
  void arm_follow();
  struct submission;
  void flush();
  void submit(std::shared_ptr<submission> sub, int attempt);
  void find_then_resubmit(std::shared_ptr<submission> sub, int attempt);

  struct waiting_spawn {
    std::shared_ptr<batch_run> run;
    spawn_spec spec;
  };
  std::vector<waiting_spawn> waiting_;  // spawned in this turn of the loop, not submitted yet
  std::map<std::string, std::weak_ptr<batch_run>> watched_;
  std::vector<std::weak_ptr<batch_run>> followed_;
  asio::steady_timer poll_timer_, follow_timer_;
  bool poll_armed_ = false, poll_in_flight_ = false, following_ = false;
  clock::time_point poll_due_{};
  milliseconds backoff_ = first_poll;
  clock::time_point last_failure_log_{};
};

class batch_run final : public engine_run, public std::enable_shared_from_this<batch_run> {
 public:
  enum class stage { submitting, pending, running, ended };

  // A job may wait in Slurm's queue (when_running); its pid is what the child reports.
  batch_run(std::shared_ptr<batch_watch> w, std::string process)
      : engine_run({.queued = true, .identified_later = false}), watch(std::move(w)), process_name(std::move(process)) {}

  void kill_and_reap() noexcept override;  // below, beside cancel_now
  void expect_exit() override { watch->poll_after(soon_poll); }

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
  bool giving_up = false;  // cancelled because it cannot run; ends once the cancel is done
  std::string detail, stderr_tail, last_reason, node;
  clock::time_point pending_since = clock::now();
  followed_file out, err;

  /// This run's Slurm id, given the id sbatch answered.
  std::string id_in(const std::string& job) const { return index < 0 ? job : job + "_" + std::to_string(index); }

  void accepted(const std::string& job) {
    id = id_in(job);
    logf(log_level::debug, process_name, ": Slurm job ", id);
    if (at == stage::ended) return cancel();  // killed while being submitted
    at = stage::pending;
    pending_since = clock::now();
    watch->watch(id, shared_from_this());
    if (pending_signal) signal(pending_signal);
  }

  /// What the latest squeue said of this job; null when it no longer lists it.
  void update(const job_row* row) {
    if (at == stage::ended || at == stage::submitting) return;
    if (!row)
      return end(not_started, "Slurm no longer lists its job " + id + " and its end was not seen");
    if (ended_state(row->state)) return ended(*row);
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
      args.push_back("--full");
    }
    args.push_back(id);
    watch->commands->run(std::move(args), {}, [w = std::weak_ptr(watch)](command_result r) {
      if (!r.ok()) logf(log_level::debug, "scancel: ", r.problem());  // it may have ended already
      if (auto watch = w.lock()) watch->poll_after(soon_poll);
    });
  }

  /// Gives up on a job Slurm cannot run: the start fails once Slurm has taken the job out of its
  /// queue, so nothing of it is left when the caller hears of the failure.
  void cancel_then_end(std::string why) {
    if (giving_up) return;
    giving_up = true;
    watch->unwatch(id);
    watch->commands->run({"scancel", id}, {}, [self = shared_from_this(), why = std::move(why)](command_result r) mutable {
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

struct batch_watch::submission {
  std::vector<std::shared_ptr<batch_run>> runs;  // one job, or the elements of an array in order
  std::string name, script;
  std::vector<std::string> args;
  std::shared_ptr<pending_submit> answer = std::make_shared<pending_submit>();

  bool all_ended() const {
    return std::all_of(runs.begin(), runs.end(), [](auto& r) { return r->at == batch_run::stage::ended; });
  }
  void refused(const std::string& why) {
    for (auto& r : runs) r->end(not_started, why);
  }
};

void batch_watch::submit_soon(std::shared_ptr<batch_run> run, const spawn_spec& spec) {
  bool first = waiting_.empty();
  waiting_.push_back({std::move(run), spec});
  if (first)
    asio::post(io, [w = weak_from_this()] {
      if (auto self = w.lock()) self->flush();
    });
}

void batch_watch::flush() {
  auto waiting = std::move(waiting_);
  waiting_.clear();
  if (shut_down) return;
  std::erase_if(waiting, [](auto& w) { return w.run->at == batch_run::stage::ended; });  // killed already
  // The same request for the same program makes one array (a Pool's workers, say).
  std::map<std::string, std::vector<waiting_spawn*>> groups;
  std::vector<std::string> order;
  for (auto& w : waiting) {
    auto key = submission_key(w.spec, cfg);
    if (!groups.count(key)) order.push_back(key);
    groups[key].push_back(&w);
  }
  std::error_code ec;
  auto cwd = std::filesystem::current_path(ec).string();
  for (auto& key : order) {
    auto& group = groups[key];
    for (std::size_t at = 0; at < group.size(); at += max_array_size) {
      std::vector<const spawn_spec*> specs;
      auto sub = std::make_shared<submission>();
      for (std::size_t i = at; i < std::min(group.size(), at + max_array_size); ++i) {
        specs.push_back(&group[i]->spec);
        sub->runs.push_back(group[i]->run);
      }
      auto& first = *specs.front();
      bool array = specs.size() > 1;
      sub->name = array ? array_job_name(first.job_id, first.name, specs.size()) : job_name(first.job_id, first.name);
      sub->args = sbatch_args(first, cfg, master, dir, cwd, sub->name, array ? static_cast<int>(specs.size()) : 0);
      sub->script = batch_script(specs);
      for (std::size_t i = 0; i < sub->runs.size(); ++i)
        sub->runs[i]->bind(sub->answer, array ? static_cast<int>(i) : -1,
                           dir + "/" + sub->name + (array ? "_" + std::to_string(i) : std::string()));
      submit(sub, 1);
    }
  }
}

void batch_watch::submit(std::shared_ptr<submission> sub, int attempt) {
  // Answered on the command thread, for a kill_and_reap that blocks the loop meanwhile; after a
  // transient failure it learns no id (the watch's shutdown cancels by comment what it missed).
  auto answered = [answer = sub->answer](const command_result& r) {
    auto job = r.ok() ? parse_sbatch_id(r.out) : std::nullopt;
    answer->answer(job ? *job : std::string());
  };
  commands->run(
      sub->args, sub->script,
      [w = weak_from_this(), sub, attempt](command_result r) {
        auto self = w.lock();
        if (!self || self->shut_down) return;
        if (r.ok()) {
          if (auto job = parse_sbatch_id(r.out)) {
            for (auto& run : sub->runs) run->accepted(*job);
            return;
          }
          return sub->refused("sbatch answered without a job id: " + r.out);
        }
        if (sub->all_ended()) return;  // killed meanwhile: nothing to report
        auto problem = r.problem();
        if (!transient_error(problem) || attempt >= submit_attempts)
          return sub->refused("Slurm refused its job: " + problem);
        // The controller may have taken the job without answering: look it up by its name
        // before submitting again.
        logf(log_level::warn, sub->name, ": sbatch failed (", problem, "); looking the job up, then trying again");
        self->find_then_resubmit(sub, attempt);
      },
      std::move(answered));
}

void batch_watch::find_then_resubmit(std::shared_ptr<submission> sub, int attempt) {
  commands->run({"squeue", "-h", "-r", "-t", "all", "--name=" + sub->name, "-O", squeue_fields()}, {},
                [w = weak_from_this(), sub, attempt](command_result r) {
                  auto self = w.lock();
                  if (!self || self->shut_down || sub->all_ended()) return;
                  for (auto& row : parse_squeue(r.out))
                    if (master_of_comment(row.comment) == self->master) {
                      auto job = row.id.substr(0, row.id.find('_'));
                      for (auto& run : sub->runs) run->accepted(job);
                      return;
                    }
                  self->submit(sub, attempt + 1);
                });
}

void batch_watch::poll_after(milliseconds delay) {
  backoff_ = std::min(backoff_, delay);
  if (poll_in_flight_) return;  // polled() plans the next one with the shorter backoff
  auto due = clock::now() + delay;
  if (poll_armed_ && poll_due_ <= due) return;
  poll_armed_ = true;
  poll_due_ = due;
  poll_timer_.expires_at(due);
  poll_timer_.async_wait([w = weak_from_this()](std::error_code ec) {
    auto self = w.lock();
    if (ec || !self) return;
    self->poll_armed_ = false;
    self->poll_now();
  });
}

void batch_watch::poll_now() {
  if (watched_.empty() || shut_down) return;
  std::vector<std::string> asked;
  std::string ids;
  for (auto& [id, run] : watched_) {
    asked.push_back(id);
    ids += (ids.empty() ? "" : ",") + id;
  }
  poll_in_flight_ = true;
  commands->run({"squeue", "-h", "-r", "-t", "all", "-j", ids, "-O", squeue_fields()}, {},
                [w = weak_from_this(), asked = std::move(asked)](command_result r) {
                  if (auto self = w.lock()) self->polled(asked, r);
                });
}

void batch_watch::polled(const std::vector<std::string>& asked, const command_result& r) {
  poll_in_flight_ = false;
  if (shut_down) return;
  // squeue fails when none of the ids is known any more; that is an answer too.
  bool none_known = !r.ok() && r.err.find("Invalid job id") != std::string::npos;
  if (!r.ok() && !none_known) {
    if (clock::now() - last_failure_log_ > std::chrono::seconds(30)) {
      last_failure_log_ = clock::now();
      logf(log_level::warn, "squeue failed (", r.problem(), "); trying again");
    }
    backoff_ = std::min(backoff_ * 2, longest_poll);
    return poll_after(backoff_);
  }
  auto rows = parse_squeue(r.out);
  bool changed = false;
  for (auto& id : asked) {
    auto it = watched_.find(id);
    if (it == watched_.end()) continue;
    auto run = it->second.lock();
    if (!run) {
      watched_.erase(it);
      continue;
    }
    const job_row* row = nullptr;
    for (auto& x : rows)
      if (x.id == id) row = &x;
    auto before = run->at;
    run->update(row);
    changed |= run->at != before;
  }
  backoff_ = changed ? first_poll : std::min(backoff_ * 2, longest_poll);
  if (!watched_.empty()) poll_after(backoff_);
}

void batch_watch::arm_follow() {
  following_ = true;
  follow_timer_.expires_after(follow_period);
  follow_timer_.async_wait([w = weak_from_this()](std::error_code ec) {
    auto self = w.lock();
    if (ec || !self) return;
    std::erase_if(self->followed_, [](auto& weak) {
      auto run = weak.lock();
      if (!run || run->at == batch_run::stage::ended) return true;
      run->follow_once();
      return false;
    });
    self->following_ = false;
    if (!self->followed_.empty() && !self->shut_down) self->arm_follow();
  });
}

namespace {
/// Jobs of the user that Slurm still queues or runs, with their comments.
std::vector<job_row> live_jobs_of_user() {
  auto r = run_command({"squeue", "-h", "-r", "-u", std::to_string(::getuid()), "-t", "PENDING,RUNNING,SUSPENDED,CONFIGURING",
                        "-O", squeue_fields()});
  if (!r.ok()) {
    logf(log_level::warn, "squeue failed: ", r.problem());
    return {};
  }
  return parse_squeue(r.out);
}

void cancel_now(const std::vector<std::string>& ids) {
  if (ids.empty()) return;
  std::vector<std::string> args{"scancel"};
  args.insert(args.end(), ids.begin(), ids.end());
  auto r = run_command(args);
  if (!r.ok()) logf(log_level::warn, "scancel failed: ", r.problem());
}
}  // namespace

void batch_watch::shutdown() {
  if (shut_down) return;
  shut_down = true;
  poll_timer_.cancel();
  follow_timer_.cancel();
  commands.reset();  // the command in flight (a submission, say) ends first
  std::vector<std::string> ids;
  for (auto& row : live_jobs_of_user())
    if (master_of_comment(row.comment) == master) ids.push_back(row.id);
  if (!ids.empty()) logf(log_level::debug, "cancelling ", ids.size(), " Slurm job(s) of this master");
  cancel_now(ids);
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

void cancel_jobs_of_dead_masters() {
  auto prefix = this_host() + ":";
  std::vector<std::string> ids;
  for (auto& row : live_jobs_of_user()) {
    auto owner = master_of_comment(row.comment);
    if (!owner.starts_with(prefix)) continue;
    int pid = std::atoi(owner.c_str() + prefix.size());
    if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) ids.push_back(row.id);
  }
  if (ids.empty()) return;
  logf(log_level::info, "cancelling ", ids.size(), " Slurm job(s) left by fiber masters that ended without cleanup");
  cancel_now(ids);
}

void batch_run::kill_and_reap() noexcept {
  if (at == stage::ended) return;
  forget_waiters();  // the caller reports the kill itself
  bool was_submitting = at == stage::submitting;
  end(-SIGKILL, {});
  if (watch->shut_down) return;  // the watch cancelled every job of this master
  // Killed means cancelled now, whether or not the loop runs again; a job being submitted is
  // waited for first.
  if (!was_submitting) return cancel_now({id});
  if (!submitted) return;  // not handed to sbatch yet: nothing to cancel
  auto job = submitted->wait();
  if (!job.empty()) cancel_now({id_in(job)});
}

batch_jobs::batch_jobs(asio::io_context& io, const fiber::config& cfg, std::string master, std::string output_dir)
    : watch_(std::make_shared<batch_watch>(io, cfg, std::move(master), std::move(output_dir))) {
  std::error_code ec;
  std::filesystem::create_directories(watch_->dir, ec);
  if (ec)
    throw error(errc::config_error, "cannot make the folder for the Slurm jobs' output, " + watch_->dir + ": " +
                                        ec.message() + "; set the config key 'slurm_dir' to a folder on a file "
                                        "system the nodes share");
}

batch_jobs::~batch_jobs() { watch_->shutdown(); }

std::unique_ptr<job> batch_jobs::submit(const spawn_spec& spec) {
  if (watch_->shut_down) throw error(errc::closed, "the Slurm backend has shut down");
  auto run = std::make_shared<batch_run>(watch_, spec.name);
  watch_->submit_soon(run, spec);
  return std::make_unique<engine_job>(std::move(run));
}

}  // namespace fiber::detail::slurm
