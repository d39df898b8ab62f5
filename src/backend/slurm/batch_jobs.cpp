// Children as Slurm batch jobs: the runs batch_watch submits and follows (batch_watch.hpp).
#include "backend/slurm/batch_jobs.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <string_view>

#include "backend/command.hpp"
#include "core/private_files.hpp"
#include "backend/slurm/batch_watch.hpp"
#include "fiber/error.hpp"

namespace fiber::detail::slurm {

void batch_run::kill_and_reap() noexcept {
  if (at == stage::ended) return;
  // What it wrote so far is passed on before it goes: a host hub's files also hold what the
  // children it forked printed, and the master that kills it at its end would lose that.
  if (at != stage::submitting) follow_once();
  forget_waiters();  // the caller reports the kill itself
  bool was_submitting = at == stage::submitting;
  end(-SIGKILL, {});
  if (watch->shut_down) return;  // the watch cancelled every job of this master
  // Killed means cancelled now, whether or not the loop runs again; a job being submitted is
  // waited for first.
  if (!was_submitting) return cancel_now({id});
  if (!submitted) return;  // not handed to sbatch yet: nothing to cancel
  auto job = submitted->wait();
  if (job.empty()) return;
  cancel_now({id_in(job)});
  reaped = true;
}

batch_jobs::batch_jobs(asio::io_context& io, const fiber::config& cfg, std::string master, std::string output_dir)
    : watch_(std::make_shared<batch_watch>(io, cfg, std::move(master), std::move(output_dir))) {
  std::error_code ec;
  make_private_folder(watch_->dir, ec);  // the jobs' output: what the run prints is the user's alone
  if (ec)
    throw error(errc::config_error, "cannot make the folder for the Slurm jobs' output, " + watch_->dir + ": " +
                                        ec.message() + "; set the config key 'slurm_dir' to a folder on a file "
                                        "system the nodes share");
}

batch_jobs::~batch_jobs() { watch_->shutdown(); }

std::unique_ptr<job> batch_jobs::submit(const spawn_spec& spec) {
  if (watch_->shut_down) throw error(errc::closed, "the Slurm backend has shut down");
  auto run = std::make_shared<batch_run>(watch_, spec.name);
  run->memory_limit_mb = static_cast<std::uint64_t>(std::max(spec.memory_mb, 0));
  watch_->submit_soon(run, spec);
  return std::make_unique<job>(std::move(run));
}

std::unique_ptr<job> batch_jobs::adopt(const std::string& id) {
  if (watch_->shut_down) throw error(errc::closed, "the Slurm backend has shut down");
  auto digits = [](std::string_view s) { return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos; };
  auto bar = id.find('_');
  if (!digits(std::string_view(id).substr(0, bar)) || (bar != std::string::npos && !digits(std::string_view(id).substr(bar + 1))))
    throw error(errc::spawn_failed, "'" + id + "' is not a Slurm job's id");
  // Only a durable run's worker that runs: a journal naming another job does not make this master
  // watch, and at its end cancel, something that is not fiber's.
  auto r = run_command({"squeue", "-h", "-j", id, "-O", squeue_fields()}, {}, std::chrono::seconds(30));
  if (!r.ok()) throw error(errc::spawn_failed, "squeue cannot say whether Slurm job " + id + " runs: " + r.problem());
  auto rows = parse_squeue(r.out);
  if (rows.empty()) throw error(errc::spawn_failed, "its Slurm job " + id + " is gone");
  if (!durable_comment(rows.front().comment)) throw error(errc::spawn_failed, "Slurm job " + id + " is not a durable run's worker");
  if (rows.front().state != "RUNNING") throw error(errc::spawn_failed, "its Slurm job " + id + " no longer runs");
  auto run = std::make_shared<batch_run>(watch_, "Slurm job " + id);
  run->id = id;
  run->at = batch_run::stage::pending;  // the next poll finds it running (or gone)
  watch_->adopted(id);
  watch_->watch(id, run);
  return std::make_unique<job>(std::move(run));
}

}  // namespace fiber::detail::slurm
