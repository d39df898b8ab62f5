// A `fiber run`'s Job on Kubernetes: its manifest, its labels, and the checks on what names it.
#pragma once
#include <boost/json/object.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace fiber::cli {

inline constexpr const char* run_label = "fiber.run";    // on a run's Job and its pod: the run's name
inline constexpr const char* user_label = "fiber.user";  // who started it
inline constexpr const char* master_container = "master";
inline constexpr const char* default_service_account = "fiber";  // containers/kubernetes/rbac.yaml's

/// What a run's Job is made of.
struct job_settings {
  std::string name, user, image, service_account, gpu_resource = "nvidia.com/gpu";
  std::string pod_patch;               // kubernetes_pod_patch: JSON merge patch for the master's pod too
  std::vector<std::string> command;    // the program (its path in the image) and its arguments
  std::vector<std::string> env;        // KEY=VALUE
  std::vector<std::string> volumes;    // -v CLAIM[:PATH][:ro]
  std::string record_token;            // run --attach: the master hands its recording to it
  std::string dashboard_token;         // the master's page's token
  // Both in the run's Secret (cli/run_tokens), never in the spec: the pod mounts it, and the
  // master reads the files FIBER_INTERNAL_RECORD_HANDOFF_FILE and FIBER_INTERNAL_DASHBOARD_TOKEN_FILE name.
  double cpu = 0;
  std::int64_t memory_bytes = 0;
  int gpu = 0;
  int restarts = 0;  // --durable --restarts N: the Job's backoffLimit (a master that failed is not
                     // started again otherwise)
};

/// The batch/v1 Job of a run: backoffLimit 0 (--restarts N: N), restartPolicy Never, the service account, the
/// master's resources (requests = limits), the claims at their paths, the downward API the
/// backend reads in a pod, and FIBER_BACKEND/FIBER_IMAGE/FIBER_RUN_NAME/FIBER_VOLUMES for it.
/// fiber::error(config_error) for a bad -v, --env or run name (a DNS-1123 label here).
boost::json::object job_manifest(const job_settings& s);

/// A run's name is its Job's, and its pods' names and labels carry it: a DNS-1123 label with room
/// for the pod's suffix; fiber::error(config_error) otherwise.
void check_kubernetes_name(const std::string& name);
/// -v flags as the volumes config key writes them: comma-separated.
std::string joined_volumes(const std::vector<std::string>& volumes);

}  // namespace fiber::cli
