// The `fiber` command's verbs on Kubernetes: the master runs as a Job (backoffLimit 0: a master
// that failed is not run again behind the user's back) of the program's image, under the service
// account of containers/kubernetes/rbac.yaml; its workers are pods it makes itself, owned by its
// pod, so that deleting the Job's pod deletes them. A run's Job and pod carry fiber.run=NAME and
// fiber.user=USER.
#pragma once
#include <boost/json/object.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cli/runner.hpp"

namespace fiber::cli {

class kubernetes_runner final : public runner {
 public:
  kubernetes_runner();
  ~kubernetes_runner();

  int run(const run_options& o) override;
  int ps() override;
  int logs(const logs_options& o) override;
  int stop(const std::string& name) override;
  int gc() override;
  int cp(const copy_options& o) override;

 private:
  struct session;
  std::unique_ptr<session> s_;
};

/// What a run's Job is made of.
struct job_settings {
  std::string name, user, image, service_account, gpu_resource = "nvidia.com/gpu";
  std::string pod_patch;               // kubernetes_pod_patch: JSON merge patch for the master's pod too
  std::vector<std::string> command;    // the program (its path in the image) and its arguments
  std::vector<std::string> env;        // KEY=VALUE
  std::vector<std::string> volumes;    // -v CLAIM[:PATH][:ro]
  double cpu = 0;
  std::int64_t memory_bytes = 0;
  int gpu = 0;
};

/// The batch/v1 Job of a run: backoffLimit 0, restartPolicy Never, the service account, the
/// master's resources (requests = limits), the claims at their paths, the downward API the
/// backend reads in a pod, and FIBER_BACKEND/FIBER_IMAGE/FIBER_RUN_NAME/FIBER_VOLUMES for it.
/// fiber::error(config_error) for a bad -v, --env or run name (a DNS-1123 label here).
boost::json::object job_manifest(const job_settings& s);

}  // namespace fiber::cli
