// Children as Slurm batch jobs (the master outside an allocation): submitted with sbatch, watched
// with one squeue call for all of them per interval, their output files followed.
#pragma once
#include <memory>
#include <string>

#include "backend/backend.hpp"

namespace fiber::detail::slurm {

class batch_watch;

class batch_jobs {
 public:
  /// `master` is host:pid (it marks the jobs), `output_dir` a folder the nodes share.
  batch_jobs(asio::io_context& io, const fiber::config& cfg, std::string master, std::string output_dir);
  /// Cancels every job of this master Slurm still runs or queues, and removes the output folder.
  ~batch_jobs();
  batch_jobs(const batch_jobs&) = delete;

  std::unique_ptr<job> submit(const spawn_spec& spec);
  /// Job `id` ("123", "123_4"), which an earlier master submitted, watched as this master's (its
  /// output stays where that master had it written).
  std::unique_ptr<job> adopt(const std::string& id);

 private:
  std::shared_ptr<batch_watch> watch_;
};

/// Cancels the jobs of masters on this host that ended without cleaning up (SIGKILLed).
void cancel_jobs_of_dead_masters();

}  // namespace fiber::detail::slurm
