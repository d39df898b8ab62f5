#include "backend/kubernetes/node_taints.hpp"

#include <boost/json.hpp>

namespace fiber::detail::kube {
namespace json = boost::json;

namespace {

std::string_view text_at(const json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string_view(v->as_string()) : std::string_view();
}

/// Kubernetes' own rule (a toleration matches a taint): the same effect, or none named; operator
/// Exists with the same key or none (every taint), or Equal (the default) with key and value.
bool tolerates(const json::object& toleration, const json::object& taint) {
  auto effect = text_at(toleration, "effect");
  if (!effect.empty() && effect != text_at(taint, "effect")) return false;
  auto key = text_at(toleration, "key");
  if (text_at(toleration, "operator") == "Exists") return key.empty() || key == text_at(taint, "key");
  return key == text_at(taint, "key") && text_at(toleration, "value") == text_at(taint, "value");
}

}  // namespace

bool refused_for_taints(std::string_view scheduler_message) {
  return scheduler_message.find("untolerated taint") != std::string_view::npos;
}

bool passing_taint(std::string_view key) {
  static constexpr std::string_view passing[] = {
      "node.kubernetes.io/not-ready",       "node.kubernetes.io/unreachable",
      "node.kubernetes.io/memory-pressure", "node.kubernetes.io/disk-pressure",
      "node.kubernetes.io/pid-pressure",    "node.kubernetes.io/network-unavailable",
      "node.cloudprovider.kubernetes.io/uninitialized"};
  for (auto p : passing)
    if (key == p) return true;
  return false;
}

untolerated untolerated_taints(const json::value& node_list, const json::object* pod_spec) {
  const json::array* tolerations = nullptr;
  if (pod_spec)
    if (auto* t = pod_spec->if_contains("tolerations"); t && t->is_array()) tolerations = &t->as_array();
  untolerated out;
  auto* list = node_list.if_object();
  auto* items = list ? list->if_contains("items") : nullptr;
  if (!items || !items->is_array()) return out;
  for (auto& item : items->as_array()) {
    auto* node = item.if_object();
    auto* spec = node ? node->if_contains("spec") : nullptr;
    auto* taints = spec && spec->is_object() ? spec->as_object().if_contains("taints") : nullptr;
    if (!taints || !taints->is_array()) continue;
    std::string said;
    for (auto& t : taints->as_array()) {
      auto* taint = t.if_object();
      if (!taint) continue;
      auto effect = text_at(*taint, "effect");
      if (effect != "NoSchedule" && effect != "NoExecute") continue;  // PreferNoSchedule keeps no pod off
      bool tolerated = false;
      if (tolerations)
        for (auto& tol : *tolerations)
          if (tol.is_object() && tolerates(tol.as_object(), *taint)) tolerated = true;
      if (tolerated) continue;
      auto key = text_at(*taint, "key");
      auto value = text_at(*taint, "value");
      if (!passing_taint(key)) out.passing = false;
      said += (said.empty() ? "" : ", ") + std::string(key) + (value.empty() ? "" : "=" + std::string(value)) + ":" +
              std::string(effect);
    }
    if (said.empty()) continue;
    auto* meta = node->if_contains("metadata");
    auto name = meta && meta->is_object() ? text_at(meta->as_object(), "name") : std::string_view();
    out.nodes += (out.nodes.empty() ? "" : ", ") + std::string(name) + " (" + said + ")";
  }
  return out;
}

std::string lasting_taints_words(const untolerated& taints) {
  return " Untolerated: " + taints.nodes + ". Remove the taint, or add a toleration with kubernetes_pod_patch";
}

void ask_untolerated_taints(api& client, json::object pod_spec, unique_function<void(untolerated, std::string)> done) {
  client.call("GET", "/api/v1/nodes", {}, {"list", "nodes"},
              [spec = std::move(pod_spec), done = std::move(done)](std::error_code ec, long, const json::value& body,
                                                                   const std::string& why) mutable {
                if (ec) return done({}, why.empty() ? ec.message() : why);
                done(untolerated_taints(body, &spec), {});
              });
}

}  // namespace fiber::detail::kube
