#include "backend/kubernetes/pod_manifest.hpp"

#include <boost/json/array.hpp>
#include <cctype>

#include "backend/kubernetes/keys_secret.hpp"
#include "core/worker_env.hpp"

namespace fiber::detail::kube {
namespace {

bool alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

boost::json::object field_env(const char* name, const char* path) {
  return {{"name", name}, {"valueFrom", {{"fieldRef", {{"fieldPath", path}}}}}};
}

}  // namespace

std::string label_value(const std::string& text) {
  std::string out;
  for (char c : text) out += alnum(c) || c == '-' || c == '_' || c == '.' ? c : '_';
  if (out.size() > 63) out.resize(63);
  while (!out.empty() && !alnum(out.front())) out.erase(out.begin());
  while (!out.empty() && !alnum(out.back())) out.pop_back();
  return out;
}

std::string pod_name(const std::string& job_id, std::uint64_t n, const std::string& process) {
  std::string out = "fiber-" + job_id + "-" + std::to_string(n) + "-";
  for (char c : process) {
    char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out += (l >= 'a' && l <= 'z') || (l >= '0' && l <= '9') ? l : '-';
  }
  if (out.size() > 63) out.resize(63);
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out;
}

std::string kube_literal(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '$') out += '$';
    out += c;
  }
  return out;
}

std::string from_kube_literal(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    out += text[i];
    if (text[i] == '$' && i + 1 < text.size() && text[i + 1] == '$') ++i;
  }
  return out;
}

boost::json::object job_object_metadata(const pod_settings& s, const std::string& name, boost::json::object labels) {
  boost::json::object metadata{{"name", name}, {"labels", std::move(labels)}};
  if (!s.master_mark.empty()) metadata["annotations"] = boost::json::object{{master_annotation, s.master_mark}};
  if (s.owner)
    metadata["ownerReferences"] = boost::json::array{boost::json::object{{"apiVersion", "v1"},
                                                                         {"kind", "Pod"},
                                                                         {"name", s.owner->name},
                                                                         {"uid", s.owner->uid},
                                                                         {"blockOwnerDeletion", false}}};
  return metadata;
}

boost::json::object pod_manifest(const pod_settings& s, const spawn_spec& spec, const std::string& name,
                                 const std::string& job_id, const std::string& keys_secret) {
  boost::json::object labels{{managed_by_label, "fiber"},
                             {job_label, label_value(spec.job_id.empty() ? job_id : spec.job_id)},
                             {process_label, label_value(spec.name)}};
  if (s.durable) labels[durable_label] = "true";
  auto metadata = job_object_metadata(s, name, std::move(labels));

  boost::json::array env;
  for (auto& [k, v] : spec.env) env.push_back(boost::json::object{{"name", k}, {"value", kube_literal(v)}});
  if (!keys_secret.empty()) env.push_back(boost::json::object{{"name", env_keys_file}, {"value", keys_file}});
  // The downward API: a worker that starts children of its own knows its pod, as the master does.
  env.push_back(field_env("FIBER_POD_NAME", "metadata.name"));
  env.push_back(field_env("FIBER_POD_NAMESPACE", "metadata.namespace"));
  env.push_back(field_env("FIBER_POD_UID", "metadata.uid"));
  env.push_back(field_env("FIBER_POD_IP", "status.podIP"));

  // Requests = limits: the pod gets exactly what it asked for (Guaranteed QoS when memory is set),
  // unless kubernetes_cpu_request lets more children share the nodes' cores than they have.
  boost::json::object limits{{"cpu", std::to_string(spec.cpu)}};
  if (spec.memory_mb > 0) limits["memory"] = std::to_string(spec.memory_mb) + "Mi";
  boost::json::object amounts = limits;
  if (!s.cpu_request.empty()) amounts["cpu"] = s.cpu_request;
  if (spec.gpu > 0) limits[s.gpu_resource] = std::to_string(spec.gpu);  // extended resources: limits only

  boost::json::array command{kube_literal(spec.executable)};
  for (auto& a : spec.args) command.push_back(boost::json::value(kube_literal(a)));

  boost::json::array volumes, mounts;
  int i = 0;
  for (auto& v : s.volumes) {
    auto vname = "volume-" + std::to_string(i++);
    boost::json::object vol{{"name", vname}};
    if (v.source.starts_with('/'))
      vol["hostPath"] = boost::json::object{{"path", v.source}};
    else
      vol["persistentVolumeClaim"] = boost::json::object{{"claimName", v.source}, {"readOnly", v.read_only}};
    volumes.push_back(std::move(vol));
    mounts.push_back(boost::json::object{{"name", vname}, {"mountPath", v.target}, {"readOnly", v.read_only}});
  }
  if (!keys_secret.empty()) {
    // The volume is the pod's own (a tmpfs the kubelet fills); only the pod's processes, all the
    // worker's, see it. Readable whatever user the image runs as: the files are root's.
    volumes.push_back(boost::json::object{
        {"name", "fiber-keys"}, {"secret", boost::json::object{{"secretName", keys_secret}, {"defaultMode", 0444}}}});
    mounts.push_back(boost::json::object{{"name", "fiber-keys"}, {"mountPath", keys_mount}, {"readOnly", true}});
  }

  boost::json::object container{{"name", container_name},
                                {"image", s.image},
                                {"command", std::move(command)},
                                {"env", std::move(env)},
                                {"resources", {{"requests", std::move(amounts)}, {"limits", std::move(limits)}}}};
  if (!mounts.empty()) container["volumeMounts"] = std::move(mounts);
  // A shared process namespace puts the pod's pause process at pid 1, so the program is not pid 1:
  // its signals (abort, a SIGKILL of its own, SIGTERM's default) behave as in a local child.
  boost::json::object pod_spec{{"restartPolicy", "Never"},
                               {"shareProcessNamespace", true},
                               {"enableServiceLinks", false},
                               {"terminationGracePeriodSeconds", s.grace_seconds},
                               {"containers", boost::json::array{std::move(container)}}};
  if (!volumes.empty()) pod_spec["volumes"] = std::move(volumes);
  // A worker reaches no API (its master starts, signals and watches pods): the namespace's token
  // is not mounted where the task's code, or whoever takes it over, could use it. A user who
  // names a service account for the workers asks for its token.
  if (!s.service_account.empty())
    pod_spec["serviceAccountName"] = s.service_account;
  else
    pod_spec["automountServiceAccountToken"] = false;

  boost::json::value pod = boost::json::object{
      {"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", std::move(metadata)}, {"spec", std::move(pod_spec)}};
  if (!s.patch.is_null()) merge_patch(pod, s.patch);
  return std::move(pod.as_object());
}

bool hopeless_waiting_reason(std::string_view reason) {
  return reason == "ErrImagePull" || reason == "ImagePullBackOff" || reason == "InvalidImageName" ||
         reason == "CreateContainerConfigError" || reason == "CreateContainerError" || reason == "RunContainerError" ||
         reason == "ErrImageNeverPull";
}

bool never_ran_reason(std::string_view reason) { return reason == "StartError"; }

void merge_patch(boost::json::value& target, const boost::json::value& patch) {
  if (!patch.is_object()) {
    target = patch;
    return;
  }
  if (!target.is_object()) target = boost::json::object{};
  auto& t = target.as_object();
  for (auto& [k, v] : patch.as_object()) {
    if (v.is_null()) {
      t.erase(k);
      continue;
    }
    merge_patch(t[k], v);
  }
}

}  // namespace fiber::detail::kube
