// The `fiber` command's verbs on Kubernetes: the master runs as a Job (backoffLimit 0: a master
// that failed is not run again behind the user's back) of the program's image, under the service
// account of containers/kubernetes/rbac.yaml; its workers are pods it makes itself, owned by its
// pod, so that deleting the Job's pod deletes them. A run's Job and pod carry fiber.run=NAME and
// fiber.user=USER.
#pragma once
#include <memory>
#include <string>

#include "cli/runner.hpp"

namespace fiber::cli {

class kubernetes_runner final : public runner {
 public:
  kubernetes_runner();
  ~kubernetes_runner() override;

  int ps() override;
  int logs(const logs_options& o) override;
  int stop(const std::string& name) override;
  int gc() override;
  int cp(const copy_options& o) override;

  struct session;  // the API clients, reached by this runner's verbs and its launches

 private:
  std::unique_ptr<launch> plan_run(const run_options& o) override;
  std::string master_output(const std::string& name) override;
  dashboard_route route_to_master(const std::string& name, int port) override;
  std::string dashboard_token(const std::string& name) override;
  std::unique_ptr<session> s_;
};

}  // namespace fiber::cli
