// The job's credentials for its worker pods: a Secret of the namespace, mounted into each pod as a
// file. A pod's spec (env, command) is readable by everyone with the "view" role; a Secret is not
// (view leaves Secrets out), so a reader of the namespace learns where the file is and nothing
// else. One Secret per distinct credentials (the master's, and each nested master's it starts
// pods for), removed when the backend ends; owned by the master's pod when it runs in one, so
// the cluster removes them with it.
#pragma once
#include <boost/json/object.hpp>
#include <map>
#include <memory>
#include <string>

#include "backend/kubernetes/pod_manifest.hpp"

namespace fiber::detail::kube {
class blocking_api;

/// Where a worker pod mounts its credentials, and the file in it.
inline constexpr const char* keys_mount = "/var/run/fiber-keys";
inline constexpr const char* keys_file = "/var/run/fiber-keys/keys";

/// The Secret `name` holding `text` under the key "keys", labelled and owned as the job's pods.
boost::json::object keys_secret_manifest(const pod_settings& settings, const std::string& name,
                                         const std::string& job_id, const std::string& text);

/// The job's credentials Secrets, made as pods need them.
class keys_secrets {
 public:
  keys_secrets(std::shared_ptr<blocking_api> api, std::string ns, std::string job_id);
  keys_secrets(const keys_secrets&) = delete;
  keys_secrets& operator=(const keys_secrets&) = delete;
  /// Deletes every Secret it made.
  ~keys_secrets();
  /// The Secret holding `text`, made now (a blocking create) the first time; fiber::error(
  /// spawn_failed) with the server's reason (a Role without "create secrets") when it cannot be.
  std::string name_for(const std::string& text, const pod_settings& settings);

 private:
  std::shared_ptr<blocking_api> api_;
  std::string ns_, job_id_;
  std::map<std::string, std::string> names_;  // text -> Secret
};

}  // namespace fiber::detail::kube
