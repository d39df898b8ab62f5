#include "backend/kubernetes/keys_secret.hpp"

#include <boost/json/serialize.hpp>

#include "backend/kubernetes/blocking_api.hpp"
#include "backend/kubernetes/pod_run.hpp"
#include "core/log.hpp"
#include "fiber/error.hpp"

namespace fiber::detail::kube {

boost::json::object keys_secret_manifest(const pod_settings& s, const std::string& name, const std::string& job_id,
                                         const std::string& text) {
  auto metadata = job_object_metadata(
      s, name, boost::json::object{{managed_by_label, "fiber"}, {job_label, label_value(job_id)}});
  // stringData: the server stores it as data (base64) and never returns it as written.
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata", std::move(metadata)},
          {"type", "Opaque"},
          {"immutable", true},
          {"stringData", boost::json::object{{"keys", text}}}};
}

keys_secrets::keys_secrets(std::shared_ptr<blocking_api> api, std::string ns, std::string job_id)
    : api_(std::move(api)), ns_(std::move(ns)), job_id_(std::move(job_id)) {}

keys_secrets::~keys_secrets() {
  for (auto& [text, name] : names_) {
    auto r = api_->call("DELETE", "/api/v1/namespaces/" + ns_ + "/secrets/" + name, delete_body(0),
                        {"delete", "secrets"});
    if (r.ec && r.status != 404) logf(log_level::warn, "could not delete Secret ", name, " of job ", job_id_, ": ", r.why);
  }
}

std::string keys_secrets::name_for(const std::string& text, const pod_settings& settings) {
  if (auto it = names_.find(text); it != names_.end()) return it->second;
  auto name = "fiber-" + job_id_ + "-keys-" + std::to_string(names_.size() + 1);
  auto body = boost::json::serialize(keys_secret_manifest(settings, name, job_id_, text));
  auto r = api_->call("POST", "/api/v1/namespaces/" + ns_ + "/secrets", std::move(body), {"create", "secrets"});
  if (r.ec)
    throw error(errc::spawn_failed, "cannot keep the job's credentials in a Secret of namespace " + ns_ + ": " + r.why);
  names_.emplace(text, name);
  return name;
}

}  // namespace fiber::detail::kube
