#include "cli/kubernetes_job.hpp"

#include "runtime/observe/recording_handoff.hpp"

#include <boost/json.hpp>
#include <cctype>
#include <cmath>

#include "backend/kubernetes/pod_manifest.hpp"
#include "cli/run_names.hpp"
#include "cli/run_tokens.hpp"
#include "runtime/observe/dashboard.hpp"
#include "core/volume.hpp"
#include "fiber/error.hpp"

namespace fiber::cli {
namespace json = boost::json;

void check_kubernetes_name(const std::string& name) {
  check_run_name(name);
  bool ok = name.size() <= 52 && std::isalnum(static_cast<unsigned char>(name.back()));
  for (char c : name) ok = ok && !std::isupper(static_cast<unsigned char>(c));
  if (!ok)
    throw error(errc::config_error, "run name '" + name +
                                        "' cannot name a Kubernetes Job: up to 52 lower-case letters, digits and "
                                        "'-', starting and ending with a letter or digit");
}

std::string joined_volumes(const std::vector<std::string>& volumes) {
  std::string all;
  for (auto& v : volumes) all += (all.empty() ? "" : ",") + v;
  return all;
}

json::object job_manifest(const job_settings& s) {
  check_kubernetes_name(s.name);
  if (s.command.empty()) throw error(errc::config_error, "nothing to run: give the program after --");
  detail::kube::pod_settings ps;
  ps.image = s.image;
  ps.gpu_resource = s.gpu_resource;
  ps.service_account = s.service_account;
  auto volumes = joined_volumes(s.volumes);
  ps.volumes = detail::parse_volumes(volumes);
  if (!s.pod_patch.empty()) {
    boost::system::error_code ec;
    ps.patch = json::parse(s.pod_patch, ec);
    if (ec || !ps.patch.is_object())
      throw error(errc::config_error, "config key 'kubernetes_pod_patch': not a JSON object; write a JSON merge patch "
                                      "such as {\"spec\":{\"nodeSelector\":{...}}}");
  }
  ps.grace_seconds = 10;  // the master removes its workers when told to stop
  detail::spawn_spec spec;
  spec.name = "master";
  spec.executable = s.command[0];
  spec.args.assign(s.command.begin() + 1, s.command.end());
  spec.env = {{"FIBER_BACKEND", "kubernetes"}, {"FIBER_IMAGE", s.image}, {"FIBER_RUN_NAME", s.name}};
  if (!volumes.empty()) spec.env.emplace_back("FIBER_VOLUMES", volumes);
  std::string mount(run_tokens_mount);
  if (!s.record_token.empty()) spec.env.emplace_back(detail::env_record_handoff_file, mount + "/" + recording_token_key);
  if (!s.dashboard_token.empty()) spec.env.emplace_back(detail::env_dashboard_token_file, mount + "/" + dashboard_token_key);
  for (auto& kv : s.env) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw error(errc::config_error, "--env " + kv + " is not KEY=VALUE");
    spec.env.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  auto pod = detail::kube::pod_manifest(ps, spec, s.name, s.name);

  // The pod the Job makes: named by the Job controller, labelled as the run's.
  auto& meta = pod.at("metadata").as_object();
  meta.erase("name");
  json::object labels{{detail::kube::managed_by_label, "fiber"},
                      {run_label, s.name},
                      {user_label, detail::kube::label_value(s.user)}};
  meta["labels"] = labels;
  auto& container = pod.at("spec").as_object().at("containers").as_array().at(0).as_object();
  container["name"] = master_container;
  if (!s.record_token.empty() || !s.dashboard_token.empty()) {
    // The run's tokens: the Secret the command makes beside the Job (the kubelet waits for it).
    auto& spec_of_pod = pod.at("spec").as_object();
    if (!spec_of_pod.contains("volumes")) spec_of_pod["volumes"] = json::array{};
    spec_of_pod["volumes"].as_array().push_back(json::object{
        {"name", "fiber-run"}, {"secret", {{"secretName", run_tokens_name(s.name)}, {"defaultMode", 0444}}}});
    if (!container.contains("volumeMounts")) container["volumeMounts"] = json::array{};
    container["volumeMounts"].as_array().push_back(
        json::object{{"name", "fiber-run"}, {"mountPath", run_tokens_mount}, {"readOnly", true}});
  }
  // The master's resources, as asked (none: it takes what the node gives).
  json::object amounts, limits;
  if (s.cpu > 0) amounts["cpu"] = std::to_string(std::llround(s.cpu * 1000)) + "m";
  if (s.memory_bytes > 0) amounts["memory"] = std::to_string(s.memory_bytes);
  limits = amounts;
  if (s.gpu > 0) limits[s.gpu_resource] = std::to_string(s.gpu);
  if (limits.empty()) container.erase("resources");
  else container["resources"] = json::object{{"requests", amounts}, {"limits", limits}};
  pod.erase("apiVersion");
  pod.erase("kind");

  return {{"apiVersion", "batch/v1"},
          {"kind", "Job"},
          {"metadata", {{"name", s.name}, {"labels", labels}}},
          {"spec", {{"backoffLimit", s.restarts}, {"template", std::move(pod)}}}};
}

// ---- the session: the API, the namespace, what to say

}  // namespace fiber::cli
