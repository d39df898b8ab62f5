// What only the Kubernetes backend has, against the Kubernetes API DOUBLE (tests/kubernetes/
// api_double.py: no real API server can run on the test machines; its pods are real containers on
// the test dockerd, and every pod the backend creates is checked against the real schema's models).
// Label kubernetes; the process, queue, pipe, pool, manager and ring suites also run whole under
// it (kubernetes:* in ctest). Without the double these tests skip.
#include <fiber/fiber.hpp>
#include <gtest/gtest.h>

#include <asio/ip/tcp.hpp>
#include <boost/json.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "backend/kubernetes/pod_watch.hpp"
#include "docker_support.hpp"
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

// One test, because the nodes are the whole double's: the steps must not interleave with another
// test that changes them.
TEST_F(kubernetes_double, a_gpu_no_node_has_fails_at_start_before_any_pod_and_a_node_that_joins_is_found) {
  auto ns = "capacity-" + std::to_string(::getpid());
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
    auto why = start_error(blind, &wants_a_gpu);
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
    if (r.at("code").is_int64() && r.at("code").as_int64() == 429 && r.at("path").as_string().find("/namespaces/" + ns + "/") != std::string::npos)
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
  EXPECT_EQ(pod.at("spec").at("containers").as_array()[0].at("resources").at("requests").at("cpu").as_string(), "1");
}

TEST_F(kubernetes_double, a_cpu_request_below_the_limit_lets_pods_share_cores) {
  fiber::context ctx(fiber::config::load({{"kubernetes_cpu_request", "100m"}}));
  fiber::simple_queue<int> started(ctx), release(ctx);
  fiber::pool p(ctx, {.processes = 1});
  auto r = p.apply_async(&hold_then_square, 0, started, release);
  (void)started.get().get();
  auto pods = fiber_test::kube_call("GET", "/api/v1/namespaces/default/pods?labelSelector=fiber.job%3D" + ctx.job_id());
  release.put(1).get();
  EXPECT_EQ(std::move(r).get(), 0);
  ASSERT_EQ(pods.body.at("items").as_array().size(), 1u);
  auto& resources = pods.body.at("items").as_array()[0].at("spec").at("containers").as_array()[0].at("resources");
  EXPECT_EQ(resources.at("requests").at("cpu").as_string(), "100m");
  EXPECT_EQ(resources.at("limits").at("cpu").as_string(), "1");
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
  // Both pods gone (their workers with them) before the held task may finish.
  EXPECT_TRUE(fiber_test::await_pods("fiber.job=" + ctx.job_id(), [&](const auto& now) {
    return !now.contains(pods[0]) && !now.contains(pods[1]);
  }));
  release.put(1).get();
  release.put(1).get();  // for the task's second run, should its first have read the first
  EXPECT_EQ(std::move(held).get(), 0);
  auto squares = std::move(rest).get();
  for (std::size_t i = 0; i < xs.size(); ++i) EXPECT_EQ(squares[i], xs[i] * xs[i]);
  EXPECT_GE(p.stats().workers_lost, 1u);
}

TEST_F(kubernetes_double, deleting_a_master_pod_deletes_its_workers_through_owner_references) {
  // A master in a pod (tests/orphan_master.cpp: starts one child, then waits) makes itself its
  // workers' owner; deleting its pod leaves the rest to Kubernetes' garbage collector (the
  // double's, modelled on the real one), whatever the master could do.
  std::string build = FIBER_TEST_BUILD_DIR;
  auto master = "fiber-test-gc-master-" + std::to_string(::getpid());
  auto field = [](const char* name, const char* path) {
    return boost::json::object{{"name", name}, {"valueFrom", {{"fieldRef", {{"fieldPath", path}}}}}};
  };
  boost::json::array env{
      boost::json::object{{"name", "FIBER_BACKEND"}, {"value", "kubernetes"}},
      boost::json::object{{"name", "FIBER_IMAGE"}, {"value", fiber_test::test_image}},
      boost::json::object{{"name", "FIBER_VOLUMES"}, {"value", "/usr:/usr:ro,/tmp:/tmp," + build + ":" + build + ":ro"}},
      field("FIBER_POD_NAME", "metadata.name"), field("FIBER_POD_UID", "metadata.uid"),
      field("FIBER_POD_IP", "status.podIP")};
  boost::json::array mounts, volumes;
  for (auto [name, path] : {std::pair<std::string, std::string>{"usr", "/usr"}, {"tmp", "/tmp"}, {"build", build}}) {
    mounts.push_back({{"name", name}, {"mountPath", path}});
    volumes.push_back({{"name", name}, {"hostPath", {{"path", path}}}});
  }
  boost::json::object pod{
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", master}, {"labels", {{"fiber.test", master}}}}},
      {"spec",
       {{"restartPolicy", "Never"},
        {"shareProcessNamespace", true},
        {"containers", boost::json::array{{{"name", "master"},
                                           {"image", fiber_test::test_image},
                                           {"command", boost::json::array{FIBER_TEST_ORPHAN_MASTER}},
                                           {"env", env},
                                           {"volumeMounts", mounts}}}},
        {"volumes", volumes}}}};
  auto created = fiber_test::kube_call("POST", "/api/v1/namespaces/default/pods", boost::json::serialize(pod));
  ASSERT_FALSE(created.ec) << created.why;
  struct remove_master {
    std::string name;
    ~remove_master() { fiber_test::kube_call("DELETE", "/api/v1/namespaces/default/pods/" + name, R"({"gracePeriodSeconds":0})"); }
  } guard{master};

  auto owned_by_master = [&](const boost::json::object& p) {
    auto* refs = p.at("metadata").as_object().if_contains("ownerReferences");
    if (!refs) return false;
    for (auto& r : refs->as_array())
      if (r.at("kind").as_string() == "Pod" && r.at("name").as_string() == master &&
          r.at("uid").as_string() == created.body.at("metadata").at("uid").as_string())
        return true;
    return false;
  };
  std::string worker;
  ASSERT_TRUE(fiber_test::await_pods("app.kubernetes.io/managed-by=fiber", [&](const auto& pods) {
    for (auto& [name, p] : pods)
      if (owned_by_master(p) && p.at("status").as_object().if_contains("podIP")) worker = name;
    return !worker.empty();
  })) << "the master in pod " << master << " started no worker that names it as owner";

  auto deleted = fiber_test::kube_call("DELETE", "/api/v1/namespaces/default/pods/" + master, R"({"gracePeriodSeconds":0})");
  ASSERT_FALSE(deleted.ec) << deleted.why;
  EXPECT_TRUE(fiber_test::await_pods("app.kubernetes.io/managed-by=fiber",
                                     [&](const auto& pods) { return !pods.contains(worker); }))
      << "worker pod " << worker << " outlived its master's pod";
}

TEST_F(kubernetes_double, a_watch_reconnecting_after_the_token_rotated_reads_it_again) {
  // A master's watch is often its only request for minutes. When the server ends it after the
  // token rotated, the new watch is refused once: the token is read again, and the watch goes on.
  asio::io_context io;
  auto where = fiber::detail::kube::kubeconfig_access(fiber_test::kube_double_dir() + "/kubeconfig", {});
  fiber::detail::kube::api api(io, where, 100, 100);
  auto mark = "watch-" + std::to_string(::getpid());
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
TEST_F(kubernetes_double, a_client_that_connects_and_says_nothing_does_not_stop_the_others) {
  auto url = fiber_test::read_text(fiber_test::kube_double_dir() + "/url");  // https://127.0.0.1:PORT
  asio::io_context io;
  asio::ip::tcp::socket silent(io);
  silent.connect({asio::ip::make_address("127.0.0.1"),
                  static_cast<unsigned short>(std::stoi(url.substr(url.rfind(':') + 1)))});
  auto listed = fiber_test::kube_call("GET", "/api/v1/namespaces/default/pods?limit=1");
  EXPECT_FALSE(listed.ec) << listed.why;
  EXPECT_EQ(listed.status, 200);
}

}  // namespace
