// The `fiber` command's verbs on Slurm: the master is a batch job running the program from this
// file system (which the nodes share: no image), its workers batch jobs of their own as the
// backend starts them. A run's job carries the comment "fiber run=NAME user=USER"; its workers
// "fiber master=NAME:PID" (FIBER_RUN_NAME). Its output goes to ~/.fiber/runs/NAME.out.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "cli/runner.hpp"

namespace fiber::cli {

class slurm_runner final : public runner {
 public:
  int ps() override;
  int logs(const logs_options& o) override;
  int stop(const std::string& name) override;
  int gc() override;
  int cp(const copy_options& o) override;

 private:
  std::unique_ptr<launch> plan_run(const run_options& o) override;
  std::string master_output(const std::string& name) override;
  dashboard_route route_to_master(const std::string& name, int port) override;
  std::string command_words() const override { return "fiber --backend slurm"; }
};

/// The batch script of a run: its environment, then exec of the command.
std::string run_script(const std::vector<std::string>& env, const std::vector<std::string>& command);

}  // namespace fiber::cli
