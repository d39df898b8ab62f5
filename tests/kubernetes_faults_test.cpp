// The faults no real API server produces on demand, against the FAULT INJECTOR
// (tests/kubernetes/fault_injector.py, an API server of the tests' own): requests throttled with
// 429 and Retry-After, every watch ended by the server right after the token rotated, a client
// that connects and says nothing, nodes whose GPUs and list rights a test changes mid-run, and
// kubelets that stop answering. The backend's normal paths are tested against the real cluster
// (kubernetes_cluster_test.cpp and the kubernetes:<suite> runs). Label kubernetes; without the
// fault injector these tests skip (under CI they fail).
#include <fiber/fiber.hpp>
#include <gtest/gtest.h>

#include <asio/ip/tcp.hpp>
#include <boost/json.hpp>
#include <string>

#include "backend/kubernetes/pod_watch.hpp"
#include "docker_support.hpp"
#include "kubernetes_support.hpp"
#include "support.hpp"

namespace {
void wants_a_gpu() {}
void do_nothing() {}
void wait_on_gate(fiber::simple_queue<int> gate) { (void)gate.get().get(); }
}  // namespace
FIBER_REMOTE(wants_a_gpu);
FIBER_META(wants_a_gpu, .gpu = 1);
FIBER_REMOTE(do_nothing);
FIBER_REMOTE(wait_on_gate);

namespace {

class kubernetes_fault_injector : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = fiber_test::kube_problem(); !why.empty())
      FIBER_TEST_ENGINE_MISSING("Kubernetes fault injector", why);
  }
};

TEST_F(kubernetes_fault_injector, a_gpu_no_node_has_fails_at_start_before_any_pod_and_a_node_that_joins_is_found) {
  auto ns = "capacity-" + fiber_test::run_id();
  fiber::context ctx(fiber::config::load({{"kubernetes_namespace", ns}}));
  auto pods_posted = [&] {
    auto log = fiber_test::kube_call("GET", "/double/requests", {}, true);
    for (auto& r : log.body.at("requests").as_array())
      if (r.at("method").as_string() == "POST" && r.at("path").as_string() == "/api/v1/namespaces/" + ns + "/pods")
        return true;
    return false;
  };
  // The nodes' allocatable says no before anything is created.
  try {
    fiber::process(ctx, &wants_a_gpu).start().get();
    FAIL() << "started on a cluster without GPUs";
  } catch (const fiber::error& e) {
    EXPECT_EQ(e.code(), fiber::errc::unsatisfiable) << e.what();
    std::string why = e.what();
    EXPECT_NE(why.find("1 nvidia.com/gpu"), std::string::npos) << why;
    EXPECT_NE(why.find("double-node-1 has cpu 64, memory 65536 MiB, 0 nvidia.com/gpu"), std::string::npos) << why;
    EXPECT_NE(why.find("kubernetes_autoscaling"), std::string::npos) << why;
  }
  EXPECT_FALSE(pods_posted());

  // Without the right to list nodes, the scheduler's refusal still fails the start. (Only this
  // test depends on listing nodes: the others' checks fall back to the scheduler meanwhile.)
  ASSERT_FALSE(fiber_test::kube_call("POST", "/double/deny?verb=list&resource=nodes", {}, true).ec);
  {
    fiber::context blind(fiber::config::load({{"kubernetes_namespace", ns}}));
    auto why = fiber_test::start_error(blind, &wants_a_gpu);
    fiber_test::kube_call("DELETE", "/double/deny?verb=list&resource=nodes", {}, true);
    EXPECT_NE(why.find("Insufficient nvidia.com/gpu"), std::string::npos) << why;
    EXPECT_NE(why.find("kubernetes_autoscaling"), std::string::npos) << why;
  }

  // A GPU node joins: the same context looks again and the child runs there.
  ASSERT_FALSE(fiber_test::kube_call("POST", "/double/node?name=double-node-2&gpu=1", {}, true).ec);
  std::string why;
  try {
    fiber::process p(ctx, &wants_a_gpu);
    p.start().get();
    p.join().get();
    EXPECT_EQ(p.exitcode(), 0);
  } catch (const fiber::error& e) {
    why = e.what();
  }
  fiber_test::kube_call("POST", "/double/node?name=double-node-2&gpu=0", {}, true);
  EXPECT_EQ(why, "");
}

TEST_F(kubernetes_fault_injector, terminate_on_a_node_that_is_gone_deletes_the_pod_without_the_kubelets_word) {
  // terminate() leaves the SIGKILL to the kubelet (it enforces the grace itself and reports how the
  // container ended). A kubelet that never answers must not make terminate() wait for good.
  auto ns = "silent-" + fiber_test::run_id();
  fiber::context ctx(fiber::config::load(
      {{"kubernetes_namespace", ns}, {"terminate_grace_ms", "100"}, {"kubernetes_stop_timeout_ms", "300"}}));
  fiber::simple_queue<int> gate(ctx);
  fiber::process p(ctx, &wait_on_gate, gate);
  p.start().get();
  ASSERT_FALSE(fiber_test::kube_call("POST", "/double/silence?namespace=" + ns, {}, true).ec);
  p.terminate().get();
  fiber_test::kube_call("DELETE", "/double/silence?namespace=" + ns, {}, true);
  EXPECT_FALSE(p.is_alive());
  EXPECT_EQ(p.exitcode(), -SIGKILL);
  // A graceful delete first, then the forced one.
  std::vector<std::string> deletes;
  auto log = fiber_test::kube_call("GET", "/double/requests", {}, true);
  for (auto& r : log.body.at("requests").as_array())
    if (r.at("method").as_string() == "DELETE" && r.at("path").as_string().find("/namespaces/" + ns + "/pods/") != std::string::npos)
      deletes.push_back(std::string(r.at("path").as_string()));
  ASSERT_EQ(deletes.size(), 2u);
  EXPECT_TRUE(fiber_test::kube_call("GET", "/api/v1/namespaces/" + ns + "/pods").body.at("items").as_array().empty());
}

TEST_F(kubernetes_fault_injector, throttled_requests_wait_for_retry_after_and_go_through) {
  auto ns = "throttled-" + fiber_test::run_id();  // its own: the log holds earlier runs' requests
  ASSERT_FALSE(fiber_test::kube_call("POST", "/double/throttle?count=3&retry_after=1&namespace=" + ns, {}, true).ec);
  fiber::context ctx(fiber::config::load({{"kubernetes_namespace", ns}}));
  fiber::process p(ctx, &do_nothing);
  p.start().get();
  p.join().get();
  EXPECT_EQ(p.exitcode(), 0);
  auto log = fiber_test::kube_call("GET", "/double/requests", {}, true);
  int throttled = 0;
  for (auto& r : log.body.at("requests").as_array())
    if (r.at("code").is_int64() && r.at("code").as_int64() == 429 && r.at("path").as_string().find("/namespaces/" + ns + "/") != std::string::npos)
      ++throttled;
  EXPECT_EQ(throttled, 3);
}

TEST_F(kubernetes_fault_injector, a_watch_reconnecting_after_the_token_rotated_reads_it_again) {
  // A master's watch is often its only request for minutes. When the server ends it after the
  // token rotated, the new watch is refused once: the token is read again, and the watch goes on.
  asio::io_context io;
  auto where = fiber::detail::kube::kubeconfig_access(fiber_test::kube_dir() + "/kubeconfig", {});
  fiber::detail::kube::api api(io, where, 100, 100);
  auto mark = "watch-" + fiber_test::run_id();
  auto watch = std::make_shared<fiber::detail::kube::pod_watch>(io, api, "default", "fiber.test=" + mark);
  std::string problem;
  bool seen = false;
  auto name = "fiber-test-" + mark;
  watch->follow(name, [&](const boost::json::object* pod, const std::string& why) {
    if (!why.empty()) problem = why;
    if (pod) seen = true;
    if (!why.empty() || pod) io.stop();
  });
  watch->start();
  while (watch->watches() == 0 && io.run_one()) {
  }
  ASSERT_EQ(watch->watches(), 1u);
  // While this loop is idle: the token rotates, the server ends every watch (a compaction), and
  // a pod the watch must see appears (one no node can run: nothing starts).
  ASSERT_FALSE(fiber_test::kube_call("POST", "/double/rotate", {}, true).ec);
  ASSERT_FALSE(fiber_test::kube_call("POST", "/double/compact", {}, true).ec);
  boost::json::object pod{
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", name}, {"labels", {{"fiber.test", mark}}}}},
      {"spec",
       {{"restartPolicy", "Never"},
        {"containers", boost::json::array{{{"name", "c"},
                                           {"image", fiber_test::test_image},
                                           {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}}}}}};
  auto created = fiber_test::kube_call("POST", "/api/v1/namespaces/default/pods", boost::json::serialize(pod));
  ASSERT_FALSE(created.ec) << created.why;
  asio::steady_timer limit(io, std::chrono::seconds(120));  // against a hang only
  limit.async_wait([&](std::error_code ec) {
    if (!ec) io.stop();
  });
  io.restart();
  io.run();
  watch->stop();
  fiber_test::kube_call("DELETE", "/api/v1/namespaces/default/pods/" + name, R"({"gracePeriodSeconds":0})");
  EXPECT_EQ(problem, "");
  EXPECT_TRUE(seen);
  EXPECT_GE(watch->lists(), 2u);  // it listed again after the refusal
}

// A client that connects and never starts its TLS handshake (a pod killed mid-connect) must not
// stop the double from answering others: when the double did TLS in accept(), such a client held
// up every new connection while kept-alive ones went on, and a second context in a suite timed out
// listing pods (the CI failure of kubernetes-pod:pool).
TEST_F(kubernetes_fault_injector, a_client_that_connects_and_says_nothing_does_not_stop_the_others) {
  auto url = fiber_test::read_text(fiber_test::kube_dir() + "/url");  // https://127.0.0.1:PORT
  asio::io_context io;
  asio::ip::tcp::socket silent(io);
  silent.connect({asio::ip::make_address("127.0.0.1"),
                  static_cast<unsigned short>(std::stoi(url.substr(url.rfind(':') + 1)))});
  auto listed = fiber_test::kube_call("GET", "/api/v1/namespaces/default/pods?limit=1");
  EXPECT_FALSE(listed.ec) << listed.why;
  EXPECT_EQ(listed.status, 200);
}

}  // namespace
