// The pod a child runs in: names Kubernetes accepts, labels, resources, volumes, the downward API,
// the owner, and the user's patch for what the config keys do not cover.
#pragma once
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/volume.hpp"
#include "backend/backend.hpp"
#include "fiber/config.hpp"

namespace fiber::detail::kube {

/// The master's own pod, when it runs in one: its workers are owned by it.
struct owner_pod {
  std::string name, uid;
};

struct pod_settings {
  std::string image;
  std::string gpu_resource = "nvidia.com/gpu";
  std::string service_account;
  std::string cpu_request;            // requests.cpu of every pod ("100m"); empty: its cpu limit
  std::vector<volume> volumes;        // a source starting with '/' is a hostPath, else a claim
  boost::json::value patch;           // a JSON merge patch; null: none
  std::optional<owner_pod> owner;
  std::string master_mark;            // annotation fiber.master: host:pid of the master (the pod's host name in a pod)
  int grace_seconds = 2;              // terminationGracePeriodSeconds
  bool durable = false;               // a durable run's: labelled fiber.durable (no sweep removes it while it runs)
};

/// Label keys every worker pod carries.
inline constexpr const char* managed_by_label = "app.kubernetes.io/managed-by";
inline constexpr const char* job_label = "fiber.job";
inline constexpr const char* process_label = "fiber.process";
inline constexpr const char* master_annotation = "fiber.master";
/// A durable run's worker pod, which outlives its master for reattach_grace_ms.
inline constexpr const char* durable_label = "fiber.durable";
/// The container's name in every worker pod.
inline constexpr const char* container_name = "worker";

/// A valid label value from any text (at most 63 of [A-Za-z0-9_.-], alphanumeric at both ends).
std::string label_value(const std::string& text);
/// A pod name (a DNS-1123 label, so it also serves as the pod's host name): fiber-<job>-<n>-<process>,
/// lower-cased, other characters as '-', cut to 63.
std::string pod_name(const std::string& job_id, std::uint64_t n, const std::string& process);

/// `keys_secret`: the Secret with the child's credentials (keys_secret.hpp), mounted where
/// FIBER_WORKER_KEYS_FILE says; empty: none.
/// The metadata of an object the job makes (a pod, its credentials' Secret): `name`, `labels`,
/// the master's mark and, when the master runs in a pod, that pod as owner.
boost::json::object job_object_metadata(const pod_settings& settings, const std::string& name, boost::json::object labels);

boost::json::object pod_manifest(const pod_settings& settings, const spawn_spec& spec, const std::string& name,
                                 const std::string& job_id, const std::string& keys_secret = {});

/// `text` as a container's command, argument or env value that Kubernetes passes on unchanged.
/// Kubernetes expands $(VAR) there and reduces $$ to $ (a worker's credentials, Z85 text, held
/// "$$" in about one pod in sixty and arrived one character short), so every '$' is doubled.
std::string kube_literal(std::string_view text);
/// The text a command, argument or env value read back from a pod or Job stands for.
std::string from_kube_literal(std::string_view text);

/// A container's waiting reason that does not mend by waiting (a pull that failed, a bad
/// configuration): a start waiting on it fails at once with it.
bool hopeless_waiting_reason(std::string_view reason);
/// A terminated container's reason that says its process never ran: StartError, the kubelet's
/// word when the runtime could not exec the program (not in the image, not executable), with
/// exit code 128 and the runtime's message. A start that ends so failed; no program exited.
bool never_ran_reason(std::string_view reason);

/// RFC 7386: objects merge key by key, null deletes, anything else replaces.
void merge_patch(boost::json::value& target, const boost::json::value& patch);

}  // namespace fiber::detail::kube
