#include "cli/run_tokens.hpp"

#include <boost/json.hpp>

#include "cli/registry_auth.hpp"

namespace fiber::cli {
namespace json = boost::json;

std::string run_tokens_name(const std::string& run) { return run + "-tokens"; }

json::object run_tokens_manifest(const std::string& run, const std::string& job_uid, const json::object& labels,
                                 const std::map<std::string, std::string>& tokens) {
  json::object data;
  for (auto& [key, token] : tokens) data[key] = token;
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata",
           {{"name", run_tokens_name(run)},
            {"labels", labels},
            {"ownerReferences", json::array{json::object{{"apiVersion", "batch/v1"},
                                                          {"kind", "Job"},
                                                          {"name", run},
                                                          {"uid", job_uid},
                                                          {"blockOwnerDeletion", false}}}}}},
          {"type", "Opaque"},
          {"immutable", true},
          {"stringData", std::move(data)}};
}

std::string token_in_secret(const json::value& secret, const std::string& key) {
  auto* o = secret.if_object();
  auto* data = o ? o->if_contains("data") : nullptr;
  auto* value = data && data->is_object() ? data->as_object().if_contains(key) : nullptr;
  if (!value || !value->is_string()) return {};
  return base64_decode(std::string(value->as_string()));
}

}  // namespace fiber::cli
