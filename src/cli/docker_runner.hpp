// The `fiber` command's verbs on a Docker engine: the master runs as a container of the program's
// image (built and pushed first when asked), with the engine's socket so that it starts its
// workers beside it. Containers of a run carry fiber.run=NAME (the master) and fiber.master=NAME:PID
// (its workers, as every docker master labels them).
#pragma once
#include <memory>
#include <string>

#include "cli/runner.hpp"

namespace fiber::cli {

class docker_runner final : public runner {
 public:
  docker_runner();
  ~docker_runner() override;

  int ps() override;
  int logs(const logs_options& o) override;
  int stop(const std::string& name) override;
  int gc() override;
  int cp(const copy_options& o) override;

  struct session;  // the engine, reached by this runner's verbs and its launches

 private:
  std::unique_ptr<launch> plan_run(const run_options& o) override;
  std::string master_output(const std::string& name) override;
  dashboard_route route_to_master(const std::string& name, int port) override;
  std::unique_ptr<session> s_;
};

}  // namespace fiber::cli
