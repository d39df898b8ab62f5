#include "primitives/durable/master_notice.hpp"

#include <csignal>
#include <cstdlib>

#include "backend/command.hpp"
#include "core/log.hpp"

namespace fiber::detail {

master_notice::master_notice(asio::io_context& io, std::function<void()> sync, std::string run_id)
    : signals_(io, SIGTERM, SIGURG), sync_(std::move(sync)), run_id_(std::move(run_id)) {
  wait();
}

master_notice::~master_notice() {
  std::error_code ignored;
  signals_.cancel(ignored);
}

master_notice::plan master_notice::plan_for(int sig, const std::string& slurm_job) {
  if (sig == SIGTERM) return {.command = {}, .end_by_signal = true};
  if (slurm_job.empty()) return {};  // a SIGURG only Slurm was asked to send: nothing to do here
  return {.command = {"scontrol", "requeue", slurm_job}};
}

void master_notice::wait() {
  signals_.async_wait([this](const std::error_code& ec, int sig) {
    if (ec) return;
    sync_();
    const char* job = std::getenv("SLURM_JOB_ID");
    auto p = plan_for(sig, job ? job : "");
    logf(log_level::warn, "the master of durable run ", run_id_, " had notice of its end (signal ", sig,
         "): its journal is on disk; started again with run_id=", run_id_,
         ", a master takes the run up where it stopped, with the workers that wait for it");
    if (!p.command.empty()) {
      auto r = run_command(p.command);
      if (!r.ok())
        logf(log_level::error, "cannot requeue this master's Slurm job (", r.problem(),
             "): it ends at its time limit; submit it requeue-able (sbatch --requeue, or fiber run --durable) and run it "
             "again with FIBER_RUN_ID=", run_id_);
    }
    if (p.end_by_signal) {
      signals_.clear();  // the default action again
      std::signal(sig, SIG_DFL);
      ::raise(sig);
      return;
    }
    wait();
  });
}

}  // namespace fiber::detail
