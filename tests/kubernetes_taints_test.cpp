// Taints that keep a child's pod off the nodes, on the REAL test cluster
// (scripts/kubernetes_cluster.sh). The scheduler's refusal names no taint ("node(s) had untolerated
// taint(s)"): a lasting taint fails the start naming the node and the taint; one the cluster takes
// off by itself (a control plane that lost sight of its nodes while it restarted, a node under
// pressure) makes the pod wait. Each test taints node k2, which would keep the pods of every test
// beside it off that node, so they run alone (RUN_SERIAL, tests/CMakeLists.txt). Label kubernetes.
#include <fiber/fiber.hpp>
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <future>
#include <string>

#include "kubernetes_support.hpp"
#include "support.hpp"

namespace {
void do_nothing() {}
}  // namespace
FIBER_REMOTE(do_nothing);

namespace {

/// A taint on node k2 for the test's length, put on and taken off with the cluster's kubectl as its
/// admin.
class taint_on_k2 {
 public:
  explicit taint_on_k2(std::string taint) : taint_(std::move(taint)) { said_ = kubectl("taint nodes k2 " + taint_); }
  ~taint_on_k2() { remove(); }
  /// Whether the scheduler has the taint. It places pods by its own cache of the nodes, which may
  /// not have it yet when the API server already does: a CI run's pod went to k2 a moment after the
  /// taint, and after the API server restart of the outage tests the scheduler's node watch may
  /// stay broken for a while (client-go backs off before it lists again), so that probes made one
  /// after another were placed ten times in half a second. A probe pod pinned to k2 is refused once
  /// the scheduler has the taint; one placed before that is deleted, gone from the API, and made
  /// again, until a refusal or a bound against hangs. Empty when it has; else what went wrong.
  std::string seen_by_the_scheduler() const {
    std::string why = "the scheduler kept placing probe pods on k2";
    auto bound = std::chrono::steady_clock::now() + std::chrono::minutes(3);
    for (int attempt = 0; std::chrono::steady_clock::now() < bound; ++attempt) {
      auto name = "taint-probe-" + fiber_test::run_id() + "-" + std::to_string(attempt);
      auto selector = "fiber.test/probe=" + name;
      auto made = fiber_test::kube_call(
          "POST", "/api/v1/namespaces/default/pods",
          R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + name + R"(","labels":{"fiber.test/probe":")" +
              name + R"("}},"spec":{"nodeSelector":{"kubernetes.io/hostname":"k2"},"terminationGracePeriodSeconds":0,)" +
              R"("containers":[{"name":"probe","image":")" + fiber_test::kube_test_image() +
              R"(","command":["/no-such-program"]}]}})",
          true);
      if (made.ec) return "making a probe pod: " + made.why + " (HTTP " + std::to_string(made.status) + ")";
      bool refused = false;
      bool followed = fiber_test::await_pods(selector, [&](const auto& pods) {
        for (auto& [pod_name, pod] : pods) {
          auto& spec = pod.at("spec").as_object();
          if (spec.contains("nodeName")) return true;  // placed: the scheduler did not have it yet
          auto* status = pod.if_contains("status");
          auto* conditions = status && status->is_object() ? status->as_object().if_contains("conditions") : nullptr;
          if (conditions && conditions->is_array())
            for (auto& c : conditions->as_array())
              if (c.is_object() && c.as_object().contains("reason") && c.as_object().at("reason") == "Unschedulable")
                return refused = true;
        }
        return false;
      });
      auto deleted = fiber_test::kube_call("DELETE", "/api/v1/namespaces/default/pods/" + name, {}, true);
      if (refused) return {};
      if (!followed) return "following probe pod " + name + ": a list or watch of its pods failed";
      if (deleted.ec) return "deleting probe pod " + name + ": " + deleted.why;
      // The next probe only once this one is gone: its kubelet's confirmation paces the loop.
      if (!fiber_test::await_pods(selector, [](const auto& pods) { return pods.empty(); }))
        return "probe pod " + name + " was not removed";
    }
    return why;
  }
  void remove() {
    if (removed_) return;
    removed_ = true;
    (void)kubectl("taint nodes k2 " + taint_.substr(0, taint_.find('=')) + "-");
  }
  const std::string& said() const { return said_; }

 private:
  static std::string kubectl(const std::string& args) {
    auto dir = fiber_test::kube_dir();
    auto bin = fiber_test::read_text(dir + "/bin");
    while (!bin.empty() && bin.back() == '\n') bin.pop_back();
    std::string out;
    if (FILE* p = ::popen((bin + "/kubectl --kubeconfig " + dir + "/admin.kubeconfig " + args + " 2>&1").c_str(), "r")) {
      char buf[4096];
      for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
      ::pclose(p);
    }
    return out;
  }
  std::string taint_, said_;
  bool removed_ = false;
};

/// The pods of a job pinned to node k2.
fiber::config on_k2() {
  return fiber::config::load(
      {{"kubernetes_pod_patch", R"({"spec":{"nodeSelector":{"kubernetes.io/hostname":"k2"}}})"},
       {"kubernetes_cpu_request", "50m"}});
}

class kubernetes_taints : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = fiber_test::kube_problem(); !why.empty()) FIBER_TEST_ENGINE_MISSING("Kubernetes", why);
    if (!fiber_test::on_real_cluster()) FIBER_TEST_BACKEND_GATED("these tests are for the real test cluster (build/engines/k8s)");
  }
};

TEST_F(kubernetes_taints, a_lasting_taint_fails_the_start_naming_the_node_and_the_taint) {
  taint_on_k2 taint("fiber.test/reserved=gpu-team:NoSchedule");
  ASSERT_NE(taint.said().find("tainted"), std::string::npos) << taint.said();
  ASSERT_EQ(taint.seen_by_the_scheduler(), "");
  fiber::context ctx(on_k2());
  auto why = fiber_test::start_error(ctx, &do_nothing);
  EXPECT_NE(why.find("untolerated taint"), std::string::npos) << why;
  EXPECT_NE(why.find("k2 (fiber.test/reserved=gpu-team:NoSchedule)"), std::string::npos) << why;
  EXPECT_NE(why.find("kubernetes_pod_patch"), std::string::npos) << why;
  // Tolerated through the pod patch, the same taint keeps nothing off.
  fiber::context tolerant(fiber::config::load(
      {{"kubernetes_pod_patch", R"({"spec":{"nodeSelector":{"kubernetes.io/hostname":"k2"},)"
                                R"("tolerations":[{"key":"fiber.test/reserved","operator":"Exists"}]}})"},
       {"kubernetes_cpu_request", "50m"}}));
  fiber::process p(tolerant, &do_nothing);
  p.start().get();
  p.join().get();
  EXPECT_EQ(p.exitcode(), 0);
}

TEST_F(kubernetes_taints, a_taint_the_cluster_takes_off_by_itself_makes_the_pod_wait_and_then_run) {
  // The cloud provider's "not initialized yet": a passing taint that this cluster's controllers
  // leave alone (it has no cloud provider), so it stays until the test takes it off, once the
  // scheduler has refused the pod for it.
  taint_on_k2 taint("node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule");
  ASSERT_NE(taint.said().find("tainted"), std::string::npos) << taint.said();
  ASSERT_EQ(taint.seen_by_the_scheduler(), "");
  fiber::context ctx(on_k2());
  auto refused = std::async(std::launch::async, [&] {
    bool seen = fiber_test::await_pods("fiber.job=" + ctx.job_id(), [](const auto& pods) {
      for (auto& [name, pod] : pods) {
        auto* status = pod.if_contains("status");
        auto* conditions = status && status->is_object() ? status->as_object().if_contains("conditions") : nullptr;
        if (!conditions || !conditions->is_array()) continue;
        for (auto& c : conditions->as_array())
          if (c.is_object() && c.as_object().contains("reason") && c.as_object().at("reason") == "Unschedulable")
            return true;
      }
      return false;
    });
    taint.remove();
    return seen;
  });
  fiber::process p(ctx, &do_nothing);
  std::string why;
  try {
    p.start().get();
    p.join().get();
  } catch (const std::exception& e) {
    why = e.what();
  }
  EXPECT_TRUE(refused.get()) << "the scheduler never refused the pod for the taint";
  EXPECT_EQ(why, "");
  EXPECT_EQ(p.exitcode(), 0) << why;
}

}  // namespace
