// The Kubernetes side of the tests: the API server DOUBLE (tests/kubernetes/api_double.py, started
// by scripts/engines.sh; its pods are real containers on the test dockerd), found through the
// state folder it writes. Needs src/ on the include path.
#pragma once
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "backend/kubernetes/kube_access.hpp"
#include "backend/kubernetes/kube_api.hpp"

namespace fiber_test {

/// Where the double keeps its kubeconfig, tokens and CA.
inline std::string kube_double_dir() {
  if (const char* d = std::getenv("FIBERTEST_KUBE_DIR"); d && *d) return d;
  return std::string(FIBER_TEST_BUILD_DIR) + "/engines/kubernetes";
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Empty when the double answers; else why not.
inline std::string kube_double_problem() {
  auto dir = kube_double_dir();
  if (!std::filesystem::exists(dir + "/ready"))
    return "no Kubernetes API double runs (no " + dir + "/ready): start it with scripts/engines.sh start kubernetes";
  return {};
}

/// True in a pod of the double (the suites' master-in-a-pod runs, tests/kubernetes/in_pod.py).
inline bool in_kube_pod() {
  const char* h = std::getenv("KUBERNETES_SERVICE_HOST");
  return h && *h;
}

/// The user's way to the double: its kubeconfig, or in a pod the pod's service account.
inline fiber::detail::kube::access user_access() {
  return in_kube_pod() ? fiber::detail::kube::in_cluster_access()
                       : fiber::detail::kube::kubeconfig_access(kube_double_dir() + "/kubeconfig", {});
}

struct kube_answer {
  std::error_code ec;
  long status = 0;
  boost::json::value body;
  std::string why;
};

/// One request to the double, to completion. `admin`: with the double's admin token (its
/// /double/... controls), else with the user's kubeconfig (in a pod: the pod's service account).
inline kube_answer kube_call(const std::string& method, const std::string& path, const std::string& body = {},
                             bool admin = false) {
  asio::io_context io;
  auto access = user_access();
  if (admin) access.tokens = fiber::detail::kube::token_source::fixed(read_text(kube_double_dir() + "/admin-token"));
  fiber::detail::kube::api api(io, access, 1000, 1000);
  std::optional<kube_answer> out;
  api.call(method, path, body, {method, path}, [&](std::error_code ec, long status, boost::json::value b, std::string why) {
    out = kube_answer{ec, status, std::move(b), std::move(why)};
  });
  while (!out && io.run_one()) {
  }
  return out ? std::move(*out) : kube_answer{std::make_error_code(std::errc::timed_out), 0, nullptr, "never answered"};
}

/// Follows the pods of namespace default that match `selector` (a list, then a watch from its
/// resourceVersion: nothing is polled) until `done` holds for them. False when it does not
/// within `limit`, a bound against hangs only.
inline bool await_pods(const std::string& selector,
                       const std::function<bool(const std::map<std::string, boost::json::object>&)>& done,
                       std::chrono::seconds limit = std::chrono::seconds(120)) {
  asio::io_context io;
  auto access = user_access();
  fiber::detail::kube::api api(io, access, 1000, 1000);
  std::map<std::string, boost::json::object> pods;
  std::string rv;
  bool held = false;
  std::uint64_t stream = 0;
  asio::steady_timer deadline(io, limit);
  deadline.async_wait([&](std::error_code ec) {
    if (!ec) io.stop();
  });
  auto path = "/api/v1/namespaces/default/pods?labelSelector=" + fiber::detail::percent_encode(selector);
  std::function<void()> watch = [&] {
    stream = api.stream(
        path + "&watch=1&timeoutSeconds=60&resourceVersion=" + rv, std::chrono::seconds(90), {"watch", "pods"},
        [&](std::string_view line) {
          boost::system::error_code ec;
          auto event = boost::json::parse(line, ec);
          if (ec || !event.is_object()) return;
          auto& pod = event.at("object").as_object();
          auto type = event.at("type").as_string();
          if (type == "ERROR") return;
          rv = pod.at("metadata").at("resourceVersion").as_string();
          if (type == "BOOKMARK") return;
          auto name = std::string(pod.at("metadata").at("name").as_string());
          if (type == "DELETED") pods.erase(name);
          else pods[name] = pod;
          if (done(pods)) {
            held = true;
            io.stop();
          }
        },
        [&](std::error_code, long, std::string) { watch(); });
  };
  api.call("GET", path, {}, {"list", "pods"}, [&](std::error_code ec, long, boost::json::value body, std::string) {
    if (ec) return io.stop();
    for (auto& item : body.at("items").as_array())
      pods[std::string(item.at("metadata").at("name").as_string())] = item.as_object();
    rv = body.at("metadata").at("resourceVersion").as_string();
    if (done(pods)) {
      held = true;
      return io.stop();
    }
    watch();
  });
  io.run();
  return held;
}

/// Pods (not being deleted) that the master `mark` (host:pid) started, by name.
inline std::vector<std::string> pods_of(const std::string& mark) {
  auto r = kube_call("GET", "/api/v1/namespaces/default/pods?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dfiber");
  std::vector<std::string> out;
  if (r.ec || !r.body.is_object()) return out;
  for (auto& item : r.body.at("items").as_array()) {
    auto& meta = item.at("metadata").as_object();
    if (meta.contains("deletionTimestamp")) continue;
    auto* ann = meta.if_contains("annotations");
    if (!ann || !ann->is_object()) continue;
    auto* m = ann->as_object().if_contains("fiber.master");
    if (m && m->is_string() && m->as_string() == mark) out.emplace_back(meta.at("name").as_string());
  }
  return out;
}

/// Points this process at the double as a master outside the cluster: the kubeconfig, and the
/// gateway of the double's pod network as the address pods dial.
inline void use_kube_double() {
  auto dir = kube_double_dir();
  ::setenv("KUBECONFIG", (dir + "/kubeconfig").c_str(), 1);
  if (!std::getenv("KUBERNETES_SERVICE_HOST")) ::setenv("FIBER_MASTER_ADDRESS", read_text(dir + "/gateway").c_str(), 0);
}

}  // namespace fiber_test
