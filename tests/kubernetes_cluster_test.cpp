// What only the Kubernetes backend has, against the REAL test cluster (scripts/kubernetes_cluster.sh:
// Kubernetes 1.36 built from source, two nodes, images pulled from the test registry): Kubernetes'
// own pull errors, RBAC refusals, strict field validation and garbage collector, kubectl on a
// running pool, and a service-account token revoked under a running master. The master runs as
// the service account fiber with exactly the Role of containers/kubernetes/rbac.yaml. Label
// kubernetes (kubernetes:kubernetes_cluster.*); the faults no real server makes on demand are in
// kubernetes_faults_test.cpp, against the fault injector.
#include <fiber/fiber.hpp>
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <numeric>

#include "backend/backend.hpp"
#include "kubernetes_support.hpp"
#include "runtime/links/direct_connect.hpp"
#include "support.hpp"

namespace {
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
FIBER_REMOTE(do_nothing);
FIBER_REMOTE(shout_and_square);
FIBER_REMOTE(hold_then_square);

namespace {

namespace fs = std::filesystem;

class kubernetes_cluster : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = fiber_test::kube_problem(); !why.empty()) FIBER_TEST_ENGINE_MISSING("Kubernetes", why);
    if (!fiber_test::on_real_cluster()) FIBER_TEST_BACKEND_GATED("these tests are for the real test cluster (build/engines/k8s)");
  }
  static std::string run(const std::string& cmd) {
    std::string out;
    if (FILE* p = ::popen((cmd + " 2>&1").c_str(), "r")) {
      char buf[4096];
      for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
      ::pclose(p);
    }
    return out;
  }
  /// The cluster's own kubectl, as the service account fiber.
  static std::string kubectl(const std::string& args) {
    auto dir = fiber_test::kube_dir();
    auto bin = fiber_test::read_text(dir + "/bin");
    while (!bin.empty() && bin.back() == '\n') bin.pop_back();
    return run(bin + "/kubectl --kubeconfig " + dir + "/kubeconfig " + args);
  }
  /// An admin request that must succeed; its body.
  static boost::json::value admin(const std::string& method, const std::string& path, const std::string& body = {}) {
    auto r = fiber_test::kube_call(method, path, body, true);
    EXPECT_FALSE(r.ec) << method << " " << path << ": " << r.why;
    return r.body;
  }
  /// A token of the service account fiber from the TokenRequest API, bound to `secret` (name,
  /// uid) when given: deleting that Secret revokes it.
  static std::string fiber_token(const std::string& secret = {}, const std::string& uid = {}) {
    boost::json::object spec{{"expirationSeconds", 3600}};
    if (!secret.empty())
      spec["boundObjectRef"] = boost::json::object{{"kind", "Secret"}, {"apiVersion", "v1"}, {"name", secret}, {"uid", uid}};
    auto r = admin("POST", "/api/v1/namespaces/default/serviceaccounts/fiber/token",
                   boost::json::serialize(boost::json::object{{"apiVersion", "authentication.k8s.io/v1"},
                                                              {"kind", "TokenRequest"},
                                                              {"spec", spec}}));
    auto* status = r.is_object() ? r.as_object().if_contains("status") : nullptr;
    return status ? std::string(status->at("token").as_string()) : std::string();
  }
};

/// Points KUBECONFIG at a copy of the tests' kubeconfig whose user is `user` (a JSON object) for
/// as long as it lives.
class kubeconfig_of {
 public:
  explicit kubeconfig_of(boost::json::object user)
      : dir_(fiber_test::run_folder() / ("fiber-kubeconfig-" + std::to_string(::getpid()))) {
    fs::create_directories(dir_);
    auto config = boost::json::parse(fiber_test::read_text(fiber_test::kube_dir() + "/kubeconfig"));
    config.at("users").as_array()[0].as_object()["user"] = std::move(user);
    std::ofstream(dir_ / "config") << boost::json::serialize(config);
    saved_ = std::getenv("KUBECONFIG");
    ::setenv("KUBECONFIG", (dir_ / "config").c_str(), 1);
  }
  ~kubeconfig_of() {
    ::setenv("KUBECONFIG", saved_.c_str(), 1);
    fs::remove_all(dir_);
  }
  fs::path dir() const { return dir_; }

 private:
  fs::path dir_;
  std::string saved_;
};

TEST_F(kubernetes_cluster, a_missing_image_fails_the_start_with_the_nodes_pull_error) {
  // The node asks the test registry, which has no such repository.
  auto image = fiber_test::kube_test_image();
  image = image.substr(0, image.find('/')) + "/fiber-test/no-such-image:1";
  fiber::context ctx(fiber::config::load({{"image", image}}));
  auto why = fiber_test::start_error(ctx, &do_nothing);
  EXPECT_TRUE(why.find("ErrImagePull") != std::string::npos || why.find("ImagePullBackOff") != std::string::npos) << why;
  EXPECT_NE(why.find("no-such-image:1"), std::string::npos) << why;
  EXPECT_NE(why.find("not found"), std::string::npos) << why;
}

TEST_F(kubernetes_cluster, a_program_the_image_lacks_fails_the_start_with_the_kubelets_start_error) {
  // Without the hostPath volume of the build folder the suites' image does not hold this test
  // program: the runtime cannot exec it, and the kubelet reports the container terminated
  // (StartError, exit code 128), not waiting.
  fiber::context ctx(fiber::config::load({{"volumes", ""}}));
  auto why = fiber_test::start_error(ctx, &do_nothing);
  EXPECT_NE(why.find("cannot start its pod"), std::string::npos) << why;
  EXPECT_NE(why.find("StartError"), std::string::npos) << why;
  EXPECT_NE(why.find("no such file or directory"), std::string::npos) << why;
}

TEST_F(kubernetes_cluster, a_namespace_without_the_role_is_refused_naming_the_verb_and_the_manifest) {
  // The service account fiber has its Role in namespace default only (rbac.yaml applied there).
  auto ns = "fiber-test-denied-" + fiber_test::run_id();
  admin("POST", "/api/v1/namespaces", R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":")" + ns + R"("}})");
  fiber::context ctx(fiber::config::load({{"kubernetes_namespace", ns}}));
  auto why = fiber_test::start_error(ctx, &do_nothing);
  fiber_test::kube_call("DELETE", "/api/v1/namespaces/" + ns, {}, true);
  // The first request there the Role would allow is the watch's list of the job's pods.
  EXPECT_NE(why.find("forbids list pods"), std::string::npos) << why;
  EXPECT_NE(why.find("system:serviceaccount:default:fiber"), std::string::npos) << why;
  EXPECT_NE(why.find(ns), std::string::npos) << why;
  EXPECT_NE(why.find("containers/kubernetes/rbac.yaml"), std::string::npos) << why;
}

TEST_F(kubernetes_cluster, an_unknown_field_is_refused_by_the_server_and_the_patch_applies) {
  // Every create asks for fieldValidation=Strict: the API server itself names the field.
  fiber::context bad(fiber::config::load({{"kubernetes_pod_patch", R"({"spec":{"bogusField":1}})"}}));
  auto why = fiber_test::start_error(bad, &do_nothing);
  EXPECT_NE(why.find("unknown field \"spec.bogusField\""), std::string::npos) << why;
  fiber::context ctx(fiber::config::load(
      {{"kubernetes_pod_patch", R"({"metadata":{"labels":{"team":"research"}}})"}, {"kubernetes_cpu_request", "50m"}}));
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
  auto& resources = pod.at("spec").at("containers").as_array()[0].at("resources");
  EXPECT_EQ(resources.at("requests").at("cpu").as_string(), "50m");
  EXPECT_EQ(resources.at("limits").at("cpu").as_string(), "1");
  // The server's defaulting and admission ran: the service account, and a Burstable pod.
  EXPECT_EQ(pod.at("spec").at("serviceAccountName").as_string(), "default");
  EXPECT_EQ(pod.at("status").at("qosClass").as_string(), "Burstable");
}

TEST_F(kubernetes_cluster, a_pool_whose_pods_cannot_be_scheduled_fails_with_the_schedulers_words) {
  // No node has the label the pods select: the scheduler refuses them. Without an autoscaler no
  // node will come, so the first refusal is a start that cannot succeed (unsatisfiable), not one
  // of three tries: the pool's work fails with the scheduler's words, and no more pods are made.
  fiber::context ctx(fiber::config::load({{"kubernetes_pod_patch", R"({"spec":{"nodeSelector":{"fiber.test/no-such-node":"x"}}})"}}));
  fiber::pool p(ctx, {.processes = 2});
  std::string why;
  std::error_code code;
  try {
    (void)p.map(&shout_and_square, std::vector<int>{1, 2, 3}).get();
  } catch (const fiber::error& e) {
    why = e.what();
    code = e.code();
  }
  EXPECT_EQ(code, fiber::errc::unsatisfiable) << why;
  EXPECT_NE(why.find("pool workers cannot start"), std::string::npos) << why;
  EXPECT_NE(why.find("didn't match Pod's node affinity/selector"), std::string::npos) << why;
  EXPECT_NE(why.find("kubernetes_autoscaling"), std::string::npos) << why;
}

TEST_F(kubernetes_cluster, kubectl_lists_reads_logs_of_and_deletes_the_pods_of_a_running_pool) {
  fiber::context ctx;
  fiber::simple_queue<int> started(ctx), release(ctx);
  fiber::pool p(ctx, {.processes = 2});
  EXPECT_EQ(p.map(&shout_and_square, std::vector<int>{1, 2, 3, 4}).get(), (std::vector<int>{1, 4, 9, 16}));
  auto names = kubectl("get pods -l fiber.job=" + ctx.job_id() + " -o name");
  std::vector<std::string> pods;
  for (std::size_t at = 0; (at = names.find("pod/", at)) != std::string::npos;) {
    auto end = names.find('\n', at);
    pods.push_back(names.substr(at + 4, end - at - 4));
    at = end;
  }
  ASSERT_EQ(pods.size(), 2u) << names;
  std::string logs;
  for (auto& pod : pods) logs += kubectl("logs " + pod);
  EXPECT_NE(logs.find("square of 1 from a pod"), std::string::npos) << logs;
  // A worker's pod deleted in the middle of a map: its task runs again elsewhere, results exact.
  auto held = p.apply_async(&hold_then_square, 0, started, release);
  (void)started.get().get();
  std::vector<int> xs(40);
  std::iota(xs.begin(), xs.end(), 1);
  auto rest = p.map_async(&shout_and_square, xs);
  auto deleted = kubectl("delete pod --wait=false " + pods[0] + " " + pods[1]);
  EXPECT_NE(deleted.find("deleted"), std::string::npos) << deleted;
  EXPECT_TRUE(fiber_test::await_pods("fiber.job=" + ctx.job_id(), [&](const auto& now) {
    return !now.contains(pods[0]) && !now.contains(pods[1]);
  }));
  release.put(1).get();
  release.put(1).get();  // for the task's second run, should its first have read the first
  EXPECT_EQ(std::move(held).get(), 0);
  auto squares = std::move(rest).get();
  for (std::size_t i = 0; i < xs.size(); ++i) EXPECT_EQ(squares[i], xs[i] * xs[i]);
  // A deletion gives a pod its grace period: a notice, in which both workers handed their work
  // back (the one whose item never ends, once the notice was nearly out).
  EXPECT_EQ(p.stats().drained, 2u);
  EXPECT_EQ(p.stats().workers_lost, 0u);
}

// A colleague who may read the namespace (a real service account bound to Kubernetes' own `view`
// ClusterRole) watches a running pool: the pods' specs and logs hold no credentials, the Secret
// that does is refused to it, and what the spec does tell (the master's address, a worker's id)
// does not link to the master.
TEST_F(kubernetes_cluster, a_reader_of_the_namespace_finds_no_credentials_and_cannot_link_as_a_worker) {
  // The reader: made once (a later run finds it there: 409).
  (void)fiber_test::kube_call("POST", "/api/v1/namespaces/default/serviceaccounts",
                              R"({"metadata":{"name":"namespace-reader"}})", true);
  (void)fiber_test::kube_call(
      "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
      R"({"metadata":{"name":"namespace-reader"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"view"},)"
      R"("subjects":[{"kind":"ServiceAccount","name":"namespace-reader","namespace":"default"}]})",
      true);
  auto token = admin("POST", "/api/v1/namespaces/default/serviceaccounts/namespace-reader/token",
                     R"({"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":600}})");
  auto reader = fiber_test::user_access();
  reader.tokens = fiber::detail::kube::token_source::fixed(std::string(token.at("status").at("token").as_string()));

  fiber::context ctx;
  fiber::simple_queue<int> started(ctx), release(ctx);
  fiber::pool p(ctx, {.processes = 2});
  auto held = p.apply_async(&hold_then_square, 0, started, release);
  (void)started.get().get();  // a worker runs: its pod is there to be read

  auto pods = fiber_test::kube_call_as(reader, "GET", "/api/v1/namespaces/default/pods?labelSelector=fiber.job%3D" + ctx.job_id());
  ASSERT_FALSE(pods.ec) << "the view role reads pods: " << pods.why;
  auto spec_text = boost::json::serialize(pods.body);
  EXPECT_EQ(spec_text.find("curve,"), std::string::npos) << "credentials in a pod's spec";
  EXPECT_EQ(spec_text.find("plain,"), std::string::npos) << "credentials in a pod's spec";
  auto& items = pods.body.at("items").as_array();
  ASSERT_FALSE(items.empty());
  std::string secret, endpoint, worker_id;
  for (auto& v : items[0].at("spec").at("volumes").as_array())
    if (auto* s = v.as_object().if_contains("secret")) secret = s->at("secretName").as_string();
  for (auto& e : items[0].at("spec").at("containers").as_array()[0].at("env").as_array()) {
    auto name = e.at("name").as_string();
    if (name == "FIBER_WORKER_ENDPOINT") endpoint = e.at("value").as_string();
    if (name == "FIBER_WORKER_TOKEN") worker_id = e.at("value").as_string();
  }
  ASSERT_FALSE(secret.empty()) << "no Secret mounted: " << spec_text;
  auto read = fiber_test::kube_call_as(reader, "GET", "/api/v1/namespaces/default/secrets/" + secret);
  EXPECT_EQ(read.status, 403) << "the view role read the job's Secret: " << read.why;
  for (auto& item : items) {
    auto name = std::string(item.at("metadata").at("name").as_string());
    auto log = kubectl("logs " + name);  // as the service account fiber: what a reader sees too
    EXPECT_EQ(log.find("curve,"), std::string::npos) << name;
  }
  // With what the spec tells and a key of its own, the reader does not get a worker's link.
  ASSERT_TRUE(endpoint.starts_with("tls://")) << endpoint;
  asio::io_context io;
  auto guess = fiber::detail::tls_session::key_for("what a reader might try");
  auto link = std::async(std::launch::async, [&] {
    return fiber::detail::connect_tls_link(io, endpoint, worker_id, guess, std::chrono::seconds(30), std::chrono::seconds(30));
  });
  EXPECT_THROW(link.get(), std::system_error);
  release.put(1).get();
  EXPECT_EQ(std::move(held).get(), 0);
  EXPECT_EQ(p.map(&shout_and_square, std::vector<int>{1, 2, 3}).get(), (std::vector<int>{1, 4, 9}));
}

TEST_F(kubernetes_cluster, deleting_a_master_pod_has_the_garbage_collector_delete_its_workers) {
  // A master in a pod (tests/orphan_master.cpp: starts one child, then waits), as the service
  // account fiber, makes itself its workers' owner; deleting its pod leaves the rest to
  // Kubernetes' garbage collector, whatever the master could do.
  std::string build = FIBER_TEST_BUILD_DIR;
  auto image = fiber_test::kube_test_image();
  auto master = "fiber-test-gc-master-" + fiber_test::run_id();
  auto field = [](const char* name, const char* path) {
    return boost::json::object{{"name", name}, {"valueFrom", {{"fieldRef", {{"fieldPath", path}}}}}};
  };
  boost::json::array env{
      boost::json::object{{"name", "FIBER_BACKEND"}, {"value", "kubernetes"}},
      boost::json::object{{"name", "FIBER_IMAGE"}, {"value", image}},
      boost::json::object{{"name", "FIBER_KUBERNETES_CPU_REQUEST"}, {"value", "100m"}},
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
        {"serviceAccountName", "fiber"},
        {"shareProcessNamespace", true},
        {"containers", boost::json::array{{{"name", "master"},
                                           {"image", image},
                                           {"command", boost::json::array{FIBER_TEST_ORPHAN_MASTER}},
                                           {"env", env},
                                           {"resources", {{"requests", {{"cpu", "100m"}}}}},
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

TEST_F(kubernetes_cluster, a_revoked_token_is_read_again_and_a_refused_one_is_a_clear_error) {
  // The token file holds a token bound to a Secret; a new token is written and the Secret deleted,
  // which revokes the old one: the master's next request is refused once, and it reads the file
  // again, as it must when a cluster rotates projected tokens.
  auto secret = "fiber-test-token-" + fiber_test::run_id();
  auto made = admin("POST", "/api/v1/namespaces/default/secrets",
                    R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":")" + secret + R"("}})");
  auto uid = std::string(made.at("metadata").at("uid").as_string());
  auto first = fiber_token(secret, uid);
  ASSERT_FALSE(first.empty());
  {
    auto token_file = fiber_test::run_folder() / ("fiber-token-" + std::to_string(::getpid()));
    std::ofstream(token_file) << first;
    kubeconfig_of config(boost::json::object{{"tokenFile", token_file.string()}});
    fiber::context ctx;
    fiber::process a(ctx, &do_nothing);
    a.start().get();
    a.join().get();
    std::ofstream(token_file) << fiber_token();
    admin("DELETE", "/api/v1/namespaces/default/secrets/" + secret);
    // The API server keeps a token it accepted for 10 s (its authentication cache, not a flag):
    // ask until it refuses the old one, so that the master's next request surely is refused.
    // One request every 100 ms, bounded against a hang only; no event says the cache let go.
    auto ask = "curl -s -o /dev/null -w '%{http_code}' --cacert " + fiber_test::kube_dir() + "/ca.crt -H 'Authorization: Bearer " +
               first + "' " + fiber_test::read_text(fiber_test::kube_dir() + "/url") + "/api/v1/namespaces/default/pods";
    std::string refused;
    for (int i = 0; i < 600 && refused != "401"; ++i) refused = run(i ? "sleep 0.1; " + ask : ask);
    EXPECT_EQ(refused, "401") << "the old token should be revoked with its Secret";
    fiber::process b(ctx, &do_nothing);
    b.start().get();
    b.join().get();
    EXPECT_EQ(b.exitcode(), 0);
    fs::remove(token_file);
  }
  // A token that is plainly wrong: the error says so and what to do.
  kubeconfig_of config(boost::json::object{{"token", "expired"}});
  std::string why;
  try {
    fiber::context ctx;
    why = fiber_test::start_error(ctx, &do_nothing);
  } catch (const fiber::error& e) {
    why = e.what();
  }
  EXPECT_NE(why.find("401 Unauthorized"), std::string::npos) << why;
  EXPECT_NE(why.find("renew"), std::string::npos) << why;
}

}  // namespace

namespace {
// A durable run's master takes up the pods its journal names, by relabelling them as its own job's;
// a pod that is not a durable run's worker (here one that looks like a fiber worker of a run that
// is not durable) is refused, and neither relabelled, followed nor deleted at the master's end.
TEST_F(kubernetes_cluster, a_pod_that_is_not_a_durable_worker_is_not_taken_up) {
  auto cfg = fiber::config::load();
  auto name = "fiber-not-durable-" + fiber_test::run_id();
  boost::json::object pod{
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", name}, {"labels", {{"app.kubernetes.io/managed-by", "fiber"}, {"fiber.job", "someone-else"}}}}},
      {"spec", {{"containers", boost::json::array{{{"name", "worker"}, {"image", fiber_test::kube_test_image()}, {"command", {"/usr/bin/sleep", "600"}}}}}}}};
  admin("POST", "/api/v1/namespaces/default/pods", boost::json::serialize(pod));
  struct deleted_at_end {
    std::function<void()> f;
    ~deleted_at_end() { f(); }
  } gone{[&] { fiber_test::kube_call("DELETE", "/api/v1/namespaces/default/pods/" + name, R"({"gracePeriodSeconds":0})", true); }};
  {
    asio::io_context io;
    auto backend = fiber::detail::make_backend(io, cfg, "not-mine");
    fiber_test::expect_error([&] { (void)backend->adopt(name); }, fiber::errc::spawn_failed,
                             "is not a durable run's worker");
  }
  auto after = admin("GET", "/api/v1/namespaces/default/pods/" + name);
  ASSERT_TRUE(after.is_object()) << "the pod was deleted";
  EXPECT_EQ(after.at("metadata").at("labels").at("fiber.job").as_string(), "someone-else");
}
}  // namespace
