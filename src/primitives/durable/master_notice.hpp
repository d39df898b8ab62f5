// A durable run's master told of its planned end: SIGTERM (its pod deleted or evicted, docker stop,
// scancel, a local kill) or SIGURG (Slurm's notice ahead of its job's time limit, which `fiber run
// --durable` asks for). What journal_sync_ms has not made durable yet would be lost with it, and
// its results run again: the journal is synced at once. Then the master ends so that its run
// goes on: on SIGTERM as SIGTERM would have ended it (its engine, or whoever restarts it, starts
// it again); on SIGURG in a Slurm job by having Slurm requeue the job, since a time limit never
// requeues one by itself. Either way the workers that wait for the next master (reattach_grace_ms)
// are taken up by it, with the results they hold.
//
// Armed only in a durable run's top master (durable_run makes it), on the loop: asio's signal_set
// takes these two signals from the program while the run lasts.
#pragma once
#include <asio/io_context.hpp>
#include <asio/signal_set.hpp>
#include <functional>
#include <string>
#include <vector>

namespace fiber::detail {

class master_notice {
 public:
  /// `sync` makes the journal durable; `run_id` is the run's, said in the log.
  master_notice(asio::io_context& io, std::function<void()> sync, std::string run_id);
  ~master_notice();
  master_notice(const master_notice&) = delete;
  master_notice& operator=(const master_notice&) = delete;

  /// What the master does at a notice by `sig` in a Slurm job `slurm_job` (empty: not one): the
  /// command it runs, if any ("scontrol requeue <job>"), and whether it then ends itself by the
  /// signal's default action.
  struct plan {
    std::vector<std::string> command;
    bool end_by_signal = false;
  };
  static plan plan_for(int sig, const std::string& slurm_job);

 private:
  void wait();

  asio::signal_set signals_;
  std::function<void()> sync_;
  std::string run_id_;
};

}  // namespace fiber::detail
