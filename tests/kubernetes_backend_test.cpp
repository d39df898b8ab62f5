// What only the Kubernetes backend has, against the Kubernetes API DOUBLE (tests/kubernetes/
// api_double.py: no real API server can run on the test machines; its pods are real containers on
// the test dockerd, and every pod the backend creates is checked against the real schema's models).
// Label kubernetes; the process, queue, pipe, pool, manager and ring suites also run whole under
// it (kubernetes:* in ctest). Without the double these tests skip.
#include <fiber/fiber.hpp>
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "kubernetes_support.hpp"
#include "support.hpp"

namespace {
void wants_a_gpu() {}
void do_nothing() {}
int shout_and_square(int x) {
  std::printf("square of %d from a pod\n", x);
  std::fflush(stdout);
  return x * x;
}
int hold_then_square(int x, fiber::simple_queue<int> started, fiber::simple_queue<int> release) {
  if (x == 0) {
    started.put(0).get();
    (void)release.get().get();
  }
  return x * x;
}
}  // namespace
FIBER_REMOTE(wants_a_gpu);
FIBER_META(wants_a_gpu, .gpu = 1);
FIBER_REMOTE(do_nothing);
FIBER_REMOTE(shout_and_square);
FIBER_REMOTE(hold_then_square);

namespace {

class kubernetes_double : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = fiber_test::kube_double_problem(); !why.empty())
      FIBER_TEST_ENGINE_MISSING("Kubernetes API double", why);
  }
  /// Runs a shell command; its stdout.
  static std::string run(const std::string& cmd) {
    std::string out;
    if (FILE* p = ::popen((cmd + " 2>&1").c_str(), "r")) {
      char buf[4096];
      for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
      ::pclose(p);
    }
    return out;
  }
  static bool have_kubectl() { return run("kubectl version --client >/dev/null && echo yes") == "yes\n"; }
  static std::string start_error(fiber::context& ctx, void (*f)()) {
    try {
      fiber::process p(ctx, f);
      p.start().get();
      p.join().get();
    } catch (const fiber::error& e) {
      return e.what();
    }
    return "(it started)";
  }
};

TEST_F(kubernetes_double, a_missing_image_fails_the_start_with_the_pull_error) {
  fiber::context ctx(fiber::config::load({{"image", "fiber-no-such-image:1"}}));
  auto why = start_error(ctx, &do_nothing);
  // ErrImagePull, then ImagePullBackOff: whichever the watch saw first.
  EXPECT_TRUE(why.find("ErrImagePull") != std::string::npos || why.find("ImagePullBackOff") != std::string::npos) << why;
  EXPECT_NE(why.find("fiber-no-such-image:1"), std::string::npos) << why;
}

TEST_F(kubernetes_double, a_gpu_no_node_has_fails_the_start_with_the_schedulers_words) {
  fiber::context ctx;
  auto why = start_error(ctx, &wants_a_gpu);
  EXPECT_NE(why.find("Insufficient nvidia.com/gpu"), std::string::npos) << why;
  EXPECT_NE(why.find("kubernetes_autoscaling"), std::string::npos) << why;
}

TEST_F(kubernetes_double, a_denied_verb_is_named_with_the_rbac_manifest_to_apply) {
  // Denied in a namespace of its own: the suites running beside it go on.
  ASSERT_FALSE(fiber_test::kube_call("POST", "/double/deny?verb=create&resource=pods&namespace=denied", {}, true).ec);
  fiber::context ctx(fiber::config::load({{"kubernetes_namespace", "denied"}}));
  auto why = start_error(ctx, &do_nothing);
  fiber_test::kube_call("DELETE", "/double/deny", {}, true);
  EXPECT_NE(why.find("forbids create pods"), std::string::npos) << why;
  EXPECT_NE(why.find("containers/kubernetes/rbac.yaml"), std::string::npos) << why;
}

TEST_F(kubernetes_double, throttled_requests_wait_for_retry_after_and_go_through) {
  auto ns = "throttled-" + std::to_string(::getpid());  // its own: the log holds earlier runs' requests
  ASSERT_FALSE(fiber_test::kube_call("POST", "/double/throttle?count=3&retry_after=1&namespace=" + ns, {}, true).ec);
  fiber::context ctx(fiber::config::load({{"kubernetes_namespace", ns}}));
  fiber::process p(ctx, &do_nothing);
  p.start().get();
  p.join().get();
  EXPECT_EQ(p.exitcode(), 0);
  auto log = fiber_test::kube_call("GET", "/double/requests", {}, true);
  int throttled = 0;
  for (auto& r : log.body.at("requests").as_array())
    if (r.at("code").as_int64() == 429 && r.at("path").as_string().find("/namespaces/" + ns + "/") != std::string::npos)
      ++throttled;
  EXPECT_EQ(throttled, 3);
}

TEST_F(kubernetes_double, a_rotated_token_is_read_again_and_a_refused_one_is_a_clear_error) {
  {
    fiber::context ctx;
    fiber::process a(ctx, &do_nothing);
    a.start().get();
    a.join().get();
    // The server forgets the token this master read; the next request is refused once, and the
    // master reads the file again.
    ASSERT_FALSE(fiber_test::kube_call("POST", "/double/rotate", {}, true).ec);
    fiber::process b(ctx, &do_nothing);
    b.start().get();
    b.join().get();
    EXPECT_EQ(b.exitcode(), 0);
  }
  // A kubeconfig whose token is plainly wrong: the error says so and what to do.
  auto dir = std::filesystem::temp_directory_path() / ("fiber-kubeconfig-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto config = boost::json::parse(fiber_test::read_text(fiber_test::kube_double_dir() + "/kubeconfig"));
  auto& user = config.at("users").as_array()[0].as_object()["user"].as_object();
  user.erase("tokenFile");
  user["token"] = "expired";
  std::ofstream(dir / "config") << boost::json::serialize(config);
  std::string saved = std::getenv("KUBECONFIG");
  ::setenv("KUBECONFIG", (dir / "config").c_str(), 1);
  std::string why;
  try {
    fiber::context ctx;
    why = start_error(ctx, &do_nothing);
  } catch (const fiber::error& e) {
    why = e.what();
  }
  ::setenv("KUBECONFIG", saved.c_str(), 1);
  std::filesystem::remove_all(dir);
  EXPECT_NE(why.find("401 Unauthorized"), std::string::npos) << why;
  EXPECT_NE(why.find("renew"), std::string::npos) << why;
}

TEST_F(kubernetes_double, every_pod_is_checked_against_the_real_schema_and_the_patch_applies) {
  // The backend asks for strict field validation, and the double checks every field against the
  // models of Debian's python3-kubernetes: a field no Pod has is refused, naming it.
  fiber::context bad(fiber::config::load({{"kubernetes_pod_patch", R"({"spec":{"bogusField":1}})"}}));
  auto why = start_error(bad, &do_nothing);
  EXPECT_NE(why.find("unknown field \"spec.bogusField\""), std::string::npos) << why;
  // A valid patch reaches the pod.
  fiber::context ctx(fiber::config::load(
      {{"kubernetes_pod_patch", R"({"metadata":{"labels":{"team":"research"}},"spec":{"nodeSelector":{"disk":"any"}}})"}}));
  fiber::simple_queue<int> started(ctx), release(ctx);
  fiber::pool p(ctx, {.processes = 1});
  auto r = p.apply_async(&hold_then_square, 0, started, release);
  (void)started.get().get();
  auto pods = fiber_test::kube_call("GET", "/api/v1/namespaces/default/pods?labelSelector=fiber.job%3D" + ctx.job_id());
  release.put(1).get();
  EXPECT_EQ(std::move(r).get(), 0);
  ASSERT_EQ(pods.body.at("items").as_array().size(), 1u);
  auto& pod = pods.body.at("items").as_array()[0].as_object();
  EXPECT_EQ(pod.at("metadata").at("labels").at("team").as_string(), "research");
  EXPECT_EQ(pod.at("metadata").at("labels").at("app.kubernetes.io/managed-by").as_string(), "fiber");
  EXPECT_EQ(pod.at("spec").at("restartPolicy").as_string(), "Never");
  EXPECT_EQ(pod.at("spec").at("containers").as_array()[0].at("resources").at("limits").at("cpu").as_string(), "1");
}

TEST_F(kubernetes_double, kubectl_lists_reads_logs_of_and_deletes_the_pods_of_a_running_pool) {
  if (!have_kubectl()) GTEST_SKIP() << "no kubectl here (Debian's kubernetes-client)";
  fiber::context ctx;
  fiber::simple_queue<int> started(ctx), release(ctx);
  fiber::pool p(ctx, {.processes = 2});
  EXPECT_EQ(p.map(&shout_and_square, std::vector<int>{1, 2, 3, 4}).get(), (std::vector<int>{1, 4, 9, 16}));
  auto names = run("kubectl get pods -l fiber.job=" + ctx.job_id() + " -o name");
  std::vector<std::string> pods;
  for (std::size_t at = 0; (at = names.find("pod/", at)) != std::string::npos;) {
    auto end = names.find('\n', at);
    pods.push_back(names.substr(at + 4, end - at - 4));
    at = end;
  }
  ASSERT_EQ(pods.size(), 2u) << names;
  std::string logs;
  for (auto& pod : pods) logs += run("kubectl logs " + pod);
  EXPECT_NE(logs.find("square of 1 from a pod"), std::string::npos) << logs;
  // A worker's pod deleted in the middle of a map: its task runs again elsewhere, results exact.
  auto held = p.apply_async(&hold_then_square, 0, started, release);
  (void)started.get().get();
  std::vector<int> xs(40);
  std::iota(xs.begin(), xs.end(), 1);
  auto rest = p.map_async(&shout_and_square, xs);
  auto deleted = run("kubectl delete pod --wait=false " + pods[0] + " " + pods[1]);
  EXPECT_NE(deleted.find("deleted"), std::string::npos) << deleted;
  release.put(1).get();
  release.put(1).get();  // for the task's second run, should its first have read the first
  EXPECT_EQ(std::move(held).get(), 0);
  auto squares = std::move(rest).get();
  for (std::size_t i = 0; i < xs.size(); ++i) EXPECT_EQ(squares[i], xs[i] * xs[i]);
  EXPECT_GE(p.stats().workers_lost, 1u);
}

}  // namespace
