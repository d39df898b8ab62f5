// The `fiber` command's verbs on Slurm: the master is a batch job running the program from this
// file system (which the nodes share: no image), its workers batch jobs of their own as the
// backend starts them. A run's job carries the comment "fiber run=NAME user=USER"; its workers
// "fiber master=NAME:PID" (FIBER_RUN_NAME). Its output goes to ~/.fiber/runs/NAME.out.
#pragma once
#include <string>

#include "cli/runner.hpp"

namespace fiber::cli {

class slurm_runner final : public runner {
 public:
  int run(const run_options& o) override;
  int ps() override;
  int logs(const logs_options& o) override;
  int stop(const std::string& name) override;
  int gc() override;
  int cp(const copy_options& o) override;
};

/// The batch script of a run: its environment, then exec of the command.
std::string run_script(const std::vector<std::string>& env, const std::vector<std::string>& command);

}  // namespace fiber::cli
