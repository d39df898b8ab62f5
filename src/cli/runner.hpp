// What the `fiber` command does on an engine: one runner per backend answers the same verbs.
#pragma once
#include <string>

#include "cli/run_options.hpp"

namespace fiber::cli {

class runner {
 public:
  virtual ~runner() = default;
  /// Exit status for the command: with --attach the master's own, else 0 once it started.
  virtual int run(const run_options& o) = 0;
  /// This user's runs: name, state, status, age, running workers.
  virtual int ps() = 0;
  virtual int logs(const logs_options& o) = 0;
  /// Returns once the run's master and workers are gone.
  virtual int stop(const std::string& name) = 0;
  /// Removes ended runs and what masters that are gone left.
  virtual int gc() = 0;
  /// Copies between a claim and this machine: one side is CLAIM:PATH (parse_claim_path).
  virtual int cp(const copy_options& o) = 0;
};

}  // namespace fiber::cli
