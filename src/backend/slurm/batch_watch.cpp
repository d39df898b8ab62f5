#include "backend/slurm/batch_watch.hpp"

#include <asio/post.hpp>
#include <unistd.h>

#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "fiber/error.hpp"

namespace fiber::detail::slurm {
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

}  // namespace

void write_all(int fd, std::string_view bytes) {
  for (std::size_t done = 0; done < bytes.size();) {
    auto n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
}

void cancel_now(const std::vector<std::string>& ids) {
  if (ids.empty()) return;
  std::vector<std::string> args{"scancel"};
  args.insert(args.end(), ids.begin(), ids.end());
  auto r = run_command(args);
  if (!r.ok()) logf(log_level::warn, "scancel failed: ", r.problem());
}

struct batch_watch::submission {
  std::vector<std::shared_ptr<batch_run>> runs;  // one job, or the elements of an array in order
  std::string name, script;
  std::vector<std::string> args;
  std::shared_ptr<pending_submit> answer = std::make_shared<pending_submit>();

  std::size_t size() const noexcept { return runs.size(); }

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
  if (shut_down) return waiting_.clear();
  std::erase_if(waiting_, [](auto& w) { return w.run->at == batch_run::stage::ended; });  // killed already
  if (waiting_.empty()) return;
  if (!pacing_) {
    // How a group splits depends on how many jobs a scheduling pass reaches: asked once, and
    // every spawn until the answer waits for it (submit_soon posts no flush meanwhile).
    if (!asking_depth_) ask_pass_depth();
    return;
  }
  auto waiting = std::move(waiting_);
  waiting_.clear();
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
  // A job asked for now with a time limit ends no sooner than the limit from now: its worker may
  // connect before any squeue lists the job (a busy controller answers late), and a time request
  // must be judged then (the next squeue gives its end exactly).
  auto limit = cfg.slurm_time_limit.empty() ? std::nullopt : parse_slurm_time(cfg.slurm_time_limit);
  auto asked_at = clock::now();
  auto per_array = std::min(max_array_size, pacing_->depth());
  for (auto& key : order) {
    auto& group = groups[key];
    for (std::size_t at = 0; at < group.size(); at += per_array) {
      std::vector<const spawn_spec*> specs;
      auto sub = std::make_shared<submission>();
      for (std::size_t i = at; i < std::min(group.size(), at + per_array); ++i) {
        specs.push_back(&group[i]->spec);
        sub->runs.push_back(group[i]->run);
      }
      auto& first = *specs.front();
      bool array = specs.size() > 1;
      sub->name = array ? array_job_name(first.job_id, first.name, specs.size()) : job_name(first.job_id, first.name);
      sub->args = sbatch_args(first, cfg, master, dir, cwd, sub->name, array ? static_cast<int>(specs.size()) : 0);
      sub->script = batch_script(specs);
      if (limit)
        for (auto& run : sub->runs) run->end_plan = planned_end{asked_at + *limit, *limit};
      for (auto& go : pacing_->offer(sub, unseen_jobs, clock::now())) send(go);
    }
  }
  if (pacing_->holding()) poll_after(hold_poll);
}

void batch_watch::release_held() {
  if (!pacing_) return;
  for (auto& go : pacing_->release(unseen_jobs, clock::now())) send(go);
  if (pacing_->holding()) poll_after(hold_poll);
}

void batch_watch::ask_pass_depth() {
  asking_depth_ = true;
  commands->run({"scontrol", "show", "config"}, {}, [w = weak_from_this()](const command_result& r) {
    auto self = w.lock();
    if (!self || self->shut_down) return;
    if (!r.ok()) logf(log_level::debug, "scontrol show config: ", r.problem(), "; taking Slurm's default queue depth");
    self->pacing_.emplace(r.ok() ? pass_depth_in(r.out) : default_pass_depth);
    self->flush();
  });
}

std::size_t batch_watch::unseen_jobs(const submission& sub) {
  return static_cast<std::size_t>(std::count_if(sub.runs.begin(), sub.runs.end(), [](auto& run) {
    // "None": pending, and no pass has looked at it yet.
    return run->at == batch_run::stage::submitting ||
           (run->at == batch_run::stage::pending && (run->last_reason.empty() || run->last_reason == "None"));
  }));
}

void batch_watch::send(const std::shared_ptr<submission>& sub) {
  if (sub->all_ended() || shut_down) return;  // killed while held
  bool array = sub->runs.size() > 1;
  for (std::size_t i = 0; i < sub->runs.size(); ++i)
    sub->runs[i]->bind(sub->answer, array ? static_cast<int>(i) : -1,
                       dir + "/" + sub->name + (array ? "_" + std::to_string(i) : std::string()));
  submit(sub, 1);
}

void batch_watch::submit(const std::shared_ptr<submission>& sub, int attempt) {
  // Answered on the command thread, for a kill_and_reap that blocks the loop meanwhile; after a
  // transient failure it learns no id (the watch's shutdown cancels by comment what it missed).
  auto answered = [answer = sub->answer](const command_result& r) {
    auto job = r.ok() ? parse_sbatch_id(r.out) : std::nullopt;
    answer->set(job ? *job : std::string());
  };
  commands->run(
      sub->args, sub->script,
      [w = weak_from_this(), sub, attempt](const command_result& r) {
        auto self = w.lock();
        if (!self || self->shut_down) return;
        if (r.ok()) {
          if (auto job = parse_sbatch_id(r.out)) {
            for (auto& run : sub->runs) run->accepted(*job);
            return;
          }
          sub->refused("sbatch answered without a job id: " + r.out);
          return self->release_held();  // a refused submission holds nothing back
        }
        if (sub->all_ended()) return self->release_held();  // killed meanwhile: nothing to report
        auto problem = r.problem();
        if (!transient_error(problem) || attempt >= submit_attempts) {
          sub->refused("Slurm refused its job: " + problem);
          return self->release_held();
        }
        // The controller may have taken the job without answering: look it up by its name
        // before submitting again.
        logf(log_level::warn, sub->name, ": sbatch failed (", problem, "); looking the job up, then trying again");
        self->find_then_resubmit(sub, attempt);
      },
      std::move(answered));
}

void batch_watch::find_then_resubmit(const std::shared_ptr<submission>& sub, int attempt) {
  commands->run({"squeue", "-h", "-r", "-t", "all", "--name=" + sub->name, "-O", squeue_fields()}, {},
                [w = weak_from_this(), sub, attempt](const command_result& r) {
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
  cadence_.ask(delay, poll_in_flight_);
  if (poll_in_flight_) return;  // polled() plans the next one within `delay`
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
                [w = weak_from_this(), asked = std::move(asked), asked_at = clock::now()](const command_result& r) {
                  if (auto self = w.lock()) self->polled(asked, asked_at, r);
                });
}

void batch_watch::polled(const std::vector<std::string>& asked, clock::time_point asked_at, const command_result& r) {
  poll_in_flight_ = false;
  if (shut_down) return;
  // squeue fails when none of the ids is known any more; that is an answer too.
  bool none_known = !r.ok() && r.err.find("Invalid job id") != std::string::npos;
  if (!r.ok() && !none_known) {
    if (clock::now() - last_failure_log_ > std::chrono::seconds(30)) {
      last_failure_log_ = clock::now();
      logf(log_level::warn, "squeue failed (", r.problem(), "); trying again");
    }
    return poll_after(cadence_.failed());
  }
  auto rows = parse_squeue(r.out);
  // By id: a pool of 10,000 workers is 10,000 rows, and a scan of them per job was 10^8 compares.
  std::unordered_map<std::string_view, const job_row*> by_id;
  by_id.reserve(rows.size());
  for (auto& x : rows) by_id[x.id] = &x;  // the last row of an id, as the scan took
  bool changed = false;
  for (auto& id : asked) {
    auto it = watched_.find(id);
    if (it == watched_.end()) continue;
    auto run = it->second.lock();
    if (!run) {
      watched_.erase(it);
      continue;
    }
    auto found = by_id.find(id);
    const job_row* row = found == by_id.end() ? nullptr : found->second;
    auto before = run->at;
    run->update(row, asked_at);
    changed |= run->at != before;
  }
  // Every job watched, those submitted since this squeue was asked too.
  bool quiet = std::all_of(watched_.begin(), watched_.end(), [](auto& entry) {
    auto run = entry.second.lock();
    return !run || run->quiet();
  });
  auto next = cadence_.answered(changed, quiet);
  if (!watched_.empty()) poll_after(next);
  release_held();
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

void batch_watch::shutdown() {
  if (shut_down) return;
  shut_down = true;
  poll_timer_.cancel();
  follow_timer_.cancel();
  // The last of what the jobs wrote, before their folder goes.
  for (auto& weak : followed_)
    if (auto run = weak.lock()) run->follow_once();
  commands.reset();  // the command in flight (a submission, say) ends first
  std::vector<std::string> ids;
  for (auto& row : live_jobs_of_user())
    if (master_of_comment(row.comment) == master || adopted_.contains(row.id)) ids.push_back(row.id);
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
    if (durable_comment(row.comment) && row.state == "RUNNING") continue;  // it waits for its run's next master
    int pid = std::atoi(owner.c_str() + prefix.size());
    if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) ids.push_back(row.id);
  }
  if (ids.empty()) return;
  logf(log_level::info, "cancelling ", ids.size(), " Slurm job(s) left by fiber masters that ended without cleanup");
  cancel_now(ids);
}

}  // namespace fiber::detail::slurm
