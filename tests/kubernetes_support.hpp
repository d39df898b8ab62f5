// The Kubernetes side of the tests: the real test cluster (scripts/kubernetes_cluster.sh; its folder
// build/engines/k8s, named by FIBERTEST_KUBE_DIR) or the fault injector (tests/kubernetes/
// fault_injector.py, its pods containers on the test dockerd; build/engines/kubernetes), both
// started by scripts/engines.sh and found through the state folder they write. Needs src/ on the
// include path.
#pragma once
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <boost/json.hpp>
#include <sys/wait.h>
#include <fiber/fiber.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "backend/kubernetes/kube_access.hpp"
#include "backend/kubernetes/kube_api.hpp"

namespace fiber_test {

/// Where the cluster (or the fault injector) keeps its kubeconfig, tokens and CA.
inline std::string kube_dir() {
  if (const char* d = std::getenv("FIBERTEST_KUBE_DIR"); d && *d) return d;
  return std::string(FIBER_TEST_BUILD_DIR) + "/engines/kubernetes";
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The suites' image: the one the cluster's folder names (a real cluster's nodes pull it from the
/// test registry), else the test dockerd's own, which the fault injector's pods use.
inline std::string kube_test_image() {
  auto named = read_text(kube_dir() + "/image");
  return named.empty() ? std::string("fiber-test-root:latest") : named;
}

/// What starting and joining a child of `f` in `ctx` fails with ("(it started)" when nothing does).
inline std::string start_error(fiber::context& ctx, void (*f)()) {
  try {
    fiber::process p(ctx, f);
    p.start().get();
    p.join().get();
  } catch (const fiber::error& e) {
    return e.what();
  }
  return "(it started)";
}

/// True when the folder is the real test cluster's (scripts/kubernetes_cluster.sh), not the fault injector's.
inline bool on_real_cluster() { return std::filesystem::exists(kube_dir() + "/image"); }

/// Empty when the cluster (or the fault injector) answers; else why not.
inline std::string kube_problem() {
  auto dir = kube_dir();
  if (!std::filesystem::exists(dir + "/ready"))
    return "no Kubernetes test cluster runs (no " + dir + "/ready): start it with scripts/engines.sh start kubernetes";
  return {};
}

/// True in a pod (the suites' master-in-a-pod runs, tests/kubernetes/in_pod.py).
inline bool in_kube_pod() {
  const char* h = std::getenv("KUBERNETES_SERVICE_HOST");
  return h && *h;
}

/// The user's way to the cluster: its kubeconfig, or in a pod the pod's service account.
inline fiber::detail::kube::access user_access() {
  return in_kube_pod() ? fiber::detail::kube::in_cluster_access()
                       : fiber::detail::kube::kubeconfig_access(kube_dir() + "/kubeconfig", {});
}

struct kube_answer {
  std::error_code ec;
  long status = 0;
  boost::json::value body;
  std::string why;
};

/// One request with `access`, to completion.
inline kube_answer kube_call_as(const fiber::detail::kube::access& access, const std::string& method,
                                const std::string& path, const std::string& body = {}) {
  asio::io_context io;
  fiber::detail::kube::api api(io, access, 1000, 1000);
  std::optional<kube_answer> out;
  api.call(method, path, body, {method, path}, [&](std::error_code ec, long status, boost::json::value b, std::string why) {
    out = kube_answer{ec, status, std::move(b), std::move(why)};
  });
  while (!out && io.run_one()) {
  }
  return out ? std::move(*out) : kube_answer{std::make_error_code(std::errc::timed_out), 0, nullptr, "never answered"};
}

/// One request to the cluster (or the double), to completion. `admin`: with its admin token (the
/// tests' own setup; the fault injector's /double/... controls), else with the user's kubeconfig (in a
/// pod: the pod's service account).
inline kube_answer kube_call(const std::string& method, const std::string& path, const std::string& body = {},
                             bool admin = false) {
  auto access = user_access();
  if (admin) access.tokens = fiber::detail::kube::token_source::fixed(read_text(kube_dir() + "/admin-token"));
  return kube_call_as(access, method, path, body);
}

/// scripts/kubernetes_cluster.sh with `what` (a fault of the real test cluster): whether it
/// succeeded, and what it printed.
inline std::pair<bool, std::string> cluster_script(const std::string& what) {
  std::string out;
  auto cmd = std::string(FIBER_TEST_SOURCE_DIR) + "/scripts/kubernetes_cluster.sh " + what + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return {false, "popen failed"};
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  int status = ::pclose(p);
  return {WIFEXITED(status) && WEXITSTATUS(status) == 0, out};
}

/// Follows the pods of namespace default that match `selector` (a list, then a watch from its
/// resourceVersion: nothing is polled) until `done` holds for them. False when it does not
/// within `limit`, a bound against hangs only. Other tests share the cluster: when one of them
/// compacts its history (410 Gone, as an ERROR event or as the watch's answer), this lists again,
/// as any client must.
inline bool await_pods(const std::string& selector,
                       const std::function<bool(const std::map<std::string, boost::json::object>&)>& done,
                       std::chrono::seconds limit = std::chrono::seconds(120)) {
  asio::io_context io;
  auto access = user_access();
  fiber::detail::kube::api api(io, access, 1000, 1000);
  std::map<std::string, boost::json::object> pods;
  std::string rv;
  bool held = false, stale = false;
  asio::steady_timer deadline(io, limit);
  deadline.async_wait([&](std::error_code ec) {
    if (!ec) io.stop();
  });
  auto path = "/api/v1/namespaces/default/pods?labelSelector=" + fiber::detail::percent_encode(selector);
  auto check = [&] {
    if (!done(pods)) return false;
    held = true;
    io.stop();
    return true;
  };
  auto name_of = [](const boost::json::object& pod) -> std::string {
    auto* meta = pod.if_contains("metadata");
    auto* name = meta && meta->is_object() ? meta->as_object().if_contains("name") : nullptr;
    return name && name->is_string() ? std::string(name->as_string()) : std::string();
  };
  std::function<void()> list, watch;
  watch = [&] {
    stale = false;
    api.stream(
        path + "&watch=1&allowWatchBookmarks=true&timeoutSeconds=60&resourceVersion=" + rv, std::chrono::seconds(90),
        {"watch", "pods"},
        [&](std::string_view line) {
          boost::system::error_code ec;
          auto event = boost::json::parse(line, ec);
          auto* e = !ec && event.is_object() ? &event.as_object() : nullptr;
          auto* type = e ? e->if_contains("type") : nullptr;
          auto* object = e ? e->if_contains("object") : nullptr;
          if (!type || !type->is_string() || !object || !object->is_object() || type->as_string() == "ERROR") {
            stale = true;  // 410 Gone (or anything but an event): this watch's resourceVersion is no good
            return;
          }
          auto& pod = object->as_object();
          if (auto* meta = pod.if_contains("metadata"); meta && meta->is_object())
            if (auto* v = meta->as_object().if_contains("resourceVersion"); v && v->is_string()) rv = v->as_string();
          if (type->as_string() == "BOOKMARK") return;
          auto name = name_of(pod);
          if (type->as_string() == "DELETED") pods.erase(name);
          else pods[name] = pod;
          check();
        },
        [&](std::error_code ec, long status, std::string) {
          if (stale || ec || status == 410) return list();
          watch();
        });
  };
  list = [&] {
    api.call("GET", path, {}, {"list", "pods"}, [&](std::error_code ec, long, boost::json::value body, std::string) {
      if (ec || !body.is_object()) return io.stop();
      pods.clear();
      if (auto* items = body.as_object().if_contains("items"); items && items->is_array())
        for (auto& item : items->as_array())
          if (item.is_object()) pods[name_of(item.as_object())] = item.as_object();
      rv.clear();
      if (auto* meta = body.as_object().if_contains("metadata"); meta && meta->is_object())
        if (auto* v = meta->as_object().if_contains("resourceVersion"); v && v->is_string()) rv = v->as_string();
      if (!check()) watch();
    });
  };
  list();
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

/// Points this process at the test cluster as a master outside it: the kubeconfig, and the
/// gateway of its pod network as the address pods dial.
inline void use_kube_test_cluster() {
  auto dir = kube_dir();
  ::setenv("KUBECONFIG", (dir + "/kubeconfig").c_str(), 1);
  if (!std::getenv("KUBERNETES_SERVICE_HOST")) ::setenv("FIBER_MASTER_ADDRESS", read_text(dir + "/gateway").c_str(), 0);
}

}  // namespace fiber_test
