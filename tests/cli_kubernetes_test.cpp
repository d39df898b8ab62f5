// The `fiber` command on the REAL test cluster (scripts/kubernetes_cluster.sh: Kubernetes built
// from source, two nodes pulling from the test registry), run as the service account fiber-user
// with exactly the Role fiber-command of containers/kubernetes/rbac.yaml: the master as a Job
// built and pushed, attach and the master's exit code, ps, logs, stop, gc, cp through a helper pod
// reached by the API server's pod proxy, a dry run, and each bad input by its message. Label
// kubernetes; without the cluster or the registry these tests skip (under CI they fail).
#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>
#include <csignal>
#include <sys/wait.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fiber/history.hpp>

#include "backend/command.hpp"
#include "cli_support.hpp"
#include "durable_support.hpp"
#include "cli/run_tokens.hpp"
#include "kubernetes_support.hpp"
#include "support.hpp"

using fiber_test::command_outcome;
namespace fs = std::filesystem;

namespace {

std::string unique(const std::string& what) { return "cli-k-" + what + "-" + fiber_test::run_id(); }

class fiber_command_on_kubernetes : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = fiber_test::kube_problem(); !why.empty()) FIBER_TEST_ENGINE_MISSING("Kubernetes", why);
    if (!fiber_test::on_real_cluster()) FIBER_TEST_BACKEND_GATED("these tests are for the real test cluster (build/engines/k8s)");
    std::ifstream in(std::string(FIBER_TEST_BUILD_DIR) + "/engines/registry/address");
    if (!(in >> registry_)) FIBER_TEST_ENGINE_MISSING("registry", "no registry runs (scripts/engines.sh start registry starts one)");
    env_ = "KUBECONFIG=" + kubeconfig();
  }
  /// The command's user: the service account fiber-user, bound to the Role fiber-command.
  static std::string kubeconfig() { return fiber_test::kube_dir() + "/command.kubeconfig"; }
  /// What the tests themselves look at and set up, with the cluster's admin token.
  static fiber_test::kube_answer admin(const std::string& method, const std::string& path, const std::string& body = {}) {
    return fiber_test::kube_call(method, path, body, true);
  }
  static long job_status(const std::string& name) {
    return admin("GET", "/apis/batch/v1/namespaces/default/jobs/" + name).status;
  }
  void TearDown() override {
    for (auto& name : started_) fiber("stop " + name);
  }
  command_outcome fiber(const std::string& args, const std::string& env = {}) const {
    return fiber_test::fiber_cmd("--backend kubernetes " + args, env_ + " " + env);
  }
  /// Runs `program` detached, built and pushed: the run's name.
  std::string start(const std::string& what, const std::string& program, const std::string& flags = {}) {
    auto name = unique(what);
    started_.push_back(name);
    auto r = fiber("run --build --registry " + registry_ + "/fibertest-kube " + small_workers + " " + flags + " --name " +
                   name + " -- " + program);
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("Created pod: " + name + "-"), std::string::npos) << r.out;
    return name;
  }
  /// The first line the run's master prints (`logs -f` waits through pending).
  std::string first_line(const std::string& name) const {
    ::setenv("KUBECONFIG", kubeconfig().c_str(), 1);
    return fiber_test::line_of({"--backend", "kubernetes", "logs", "-f", name}, fiber_test::a_pid);
  }
  static boost::json::object get(const std::string& path) {
    auto r = admin("GET", path);
    return r.body.is_object() ? r.body.as_object() : boost::json::object{};
  }
  static boost::json::array pods(const std::string& selector) {
    auto list = get("/api/v1/namespaces/default/pods?labelSelector=" + fiber::detail::percent_encode(selector));
    auto* items = list.if_contains("items");
    return items && items->is_array() ? items->as_array() : boost::json::array{};
  }
  /// The uid of the run's master pod ("" when it has none).
  static std::string master_uid(const std::string& name) {
    auto p = pods("job-name=" + name);
    return p.empty() ? "" : std::string(p[0].at("metadata").at("uid").as_string());
  }
  /// True once a pod owned by the pod with `uid` is Running as the API server says (the kubelet
  /// reports it a moment after its container runs, so a child may say it runs before it does).
  static bool a_worker_running_of(const std::string& uid) {
    return fiber_test::await_pods("app.kubernetes.io/managed-by=fiber", [&](const auto& all) {
      for (auto& [name, pod] : all) {
        auto* owners = pod.at("metadata").as_object().if_contains("ownerReferences");
        auto* status = pod.if_contains("status");
        auto* phase = status && status->is_object() ? status->as_object().if_contains("phase") : nullptr;
        if (!owners || !phase || !phase->is_string() || phase->as_string() != "Running") continue;
        for (auto& r : owners->as_array())
          if (r.at("uid").as_string() == uid) return true;
      }
      return false;
    });
  }
  /// True once no pod is owned by the pod with `uid` (a watch, bounded against hangs only).
  static bool no_workers_of(const std::string& uid) {
    return fiber_test::await_pods("app.kubernetes.io/managed-by=fiber", [&](const auto& all) {
      for (auto& [name, pod] : all) {
        auto* owners = pod.at("metadata").as_object().if_contains("ownerReferences");
        if (!owners) continue;
        for (auto& r : owners->as_array())
          if (r.at("uid").as_string() == uid) return false;
      }
      return true;
    });
  }
  std::string registry_, env_;
  std::vector<std::string> started_;
  // The masters' workers request a tenth of a core (kubernetes_cpu_request), as the suites' own
  // pods do: the test cluster's two nodes have two cores each, and tests run side by side.
  static constexpr const char* small_workers = "--env FIBER_KUBERNETES_CPU_REQUEST=100m";
};

/// A user of the fiber command with the Role fiber-command less one verb on one resource: a
/// service account, Role and RoleBinding of its own (the cluster's Role fiber-command is read,
/// not written again here), and a kubeconfig with its token; all removed with it.
class command_user_without {
 public:
  command_user_without(const std::string& verb, const std::string& resource)
      : name_(unique("without-" + verb)), file_(fiber_test::run_folder() / (name_ + ".kubeconfig")) {
    const std::string rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/";
    auto role = fiber_test::kube_call("GET", rbac + "roles/fiber-command", {}, true).body;
    boost::json::array rules;
    for (auto& r : role.at("rules").as_array()) {
      auto rule = r.as_object();
      auto& resources = rule.at("resources").as_array();
      if (std::find(resources.begin(), resources.end(), boost::json::value(resource)) != resources.end()) {
        auto& verbs = rule.at("verbs").as_array();
        verbs.erase(std::remove(verbs.begin(), verbs.end(), boost::json::value(verb)), verbs.end());
        if (verbs.empty()) continue;
      }
      rules.push_back(std::move(rule));
    }
    auto meta = boost::json::object{{"name", name_}};
    made("/api/v1/namespaces/default/serviceaccounts", {{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", meta}});
    made(rbac + "roles", {{"apiVersion", "rbac.authorization.k8s.io/v1"}, {"kind", "Role"}, {"metadata", meta}, {"rules", rules}});
    made(rbac + "rolebindings",
         {{"apiVersion", "rbac.authorization.k8s.io/v1"},
          {"kind", "RoleBinding"},
          {"metadata", meta},
          {"roleRef", {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Role"}, {"name", name_}}},
          {"subjects", boost::json::array{{{"kind", "ServiceAccount"}, {"name", name_}, {"namespace", "default"}}}}});
    auto token = fiber_test::kube_call("POST", "/api/v1/namespaces/default/serviceaccounts/" + name_ + "/token",
                                       R"({"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{}})", true);
    auto config = boost::json::parse(fiber_test::read_text(fiber_test::kube_dir() + "/command.kubeconfig"));
    config.at("users").as_array()[0].as_object()["user"] =
        boost::json::object{{"token", token.body.at("status").at("token")}};
    std::ofstream(file_) << boost::json::serialize(config);
  }
  ~command_user_without() {
    const std::string rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/";
    fiber_test::kube_call("DELETE", rbac + "rolebindings/" + name_, {}, true);
    fiber_test::kube_call("DELETE", rbac + "roles/" + name_, {}, true);
    fiber_test::kube_call("DELETE", "/api/v1/namespaces/default/serviceaccounts/" + name_, {}, true);
    fs::remove(file_);
  }
  std::string kubeconfig() const { return file_.string(); }
  /// True once the API server's authorizer has taken the new RoleBinding (it follows RBAC objects
  /// through a watch of its own, so a request right after the create may still be refused):
  /// asked of the server itself, SelfSubjectAccessReview of a verb the Role keeps, bounded
  /// against a hang only.
  bool ready() const {
    auto access = fiber::detail::kube::kubeconfig_access(file_.string(), {});
    auto review = R"({"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview",)"
                  R"("spec":{"resourceAttributes":{"namespace":"default","verb":"get","resource":"persistentvolumeclaims"}}})";
    for (int i = 0; i < 300; ++i) {
      auto r = fiber_test::kube_call_as(access, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review);
      if (!r.ec && r.body.is_object() && r.body.at("status").as_object().if_contains("allowed") &&
          r.body.at("status").at("allowed").as_bool())
        return true;
      ::usleep(100000);
    }
    return false;
  }

 private:
  void made(const std::string& path, boost::json::object body) {
    auto r = fiber_test::kube_call("POST", path, boost::json::serialize(body), true);
    EXPECT_EQ(r.status, 201) << path << ": " << r.why;
  }
  std::string name_;
  fs::path file_;
};

}  // namespace

// Attached, `fiber run` also takes the master's recording before its pod goes: the run is in this
// host's `fiber history` (runtime/observe/recording_handoff, cli/recording_taker).
TEST_F(fiber_command_on_kubernetes, runs_the_pi_example_as_a_job_built_and_pushed_exits_with_its_code_and_keeps_its_recording) {
  auto name = unique("pi");
  started_.push_back(name);
  auto runs_here = fiber_test::run_folder() / unique("runs");
  fs::remove_all(runs_here);
  auto r = fiber("run --build --registry " + registry_ + "/fibertest-kube " + small_workers + " --attach --name " + name +
                     " -- " + FIBER_TEST_BUILD_DIR "/examples/pi_estimation",
                 "FIBER_RECORD_DIR=" + runs_here.string());
  EXPECT_EQ(r.code, 0) << r.out;
  auto runs = fiber::run_history(fiber::config::load({{"record_dir", runs_here.string()}}));
  ASSERT_EQ(runs.size(), 1u) << r.out;
  EXPECT_EQ(runs[0].backend, "kubernetes");
  EXPECT_TRUE(runs[0].ended);
  EXPECT_GT(runs[0].tasks_sent, 0u);
  EXPECT_EQ(runs[0].tasks_done, runs[0].tasks_sent);
  EXPECT_NE(r.out.find("the run's recording is kept here: " + runs[0].path), std::string::npos) << r.out;
  fs::remove_all(runs_here);
  EXPECT_NE(r.out.find("Pi is roughly 3.1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Created pod: " + name + "-"), std::string::npos) << r.out;
  // The master ran the pushed image by digest (and its workers, FIBER_IMAGE, the same).
  EXPECT_NE(r.out.find("image " + registry_ + "/fibertest-kube/pi-estimation@sha256:"), std::string::npos) << r.out;
  auto job = get("/apis/batch/v1/namespaces/default/jobs/" + name);
  ASSERT_TRUE(job.contains("spec")) << boost::json::serialize(job);
  EXPECT_EQ(job.at("spec").at("backoffLimit").as_int64(), 0);
  EXPECT_EQ(job.at("spec").at("template").at("spec").at("serviceAccountName").as_string(), "fiber");
  // attach returns on the master's exit as its container's state reports it (the pod's phase and
  // the Job's count follow moments later).
  auto master = pods("job-name=" + name);
  ASSERT_EQ(master.size(), 1u);
  EXPECT_EQ(master[0].at("status").at("containerStatuses").at(0).at("state").at("terminated").at("exitCode").as_int64(), 0)
      << boost::json::serialize(master[0]);
}

TEST_F(fiber_command_on_kubernetes, attach_exits_with_the_masters_exit_code) {
  auto name = unique("exit3");
  started_.push_back(name);
  auto r = fiber("run --build --registry " + registry_ + "/fibertest-kube --attach --name " + name + " -- " +
                 FIBER_TEST_EXIT_WITH + " 3 hello");
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_NE(r.out.find("argument 2: hello"), std::string::npos) << r.out;
  // backoffLimit 0: the failed master was not run again.
  EXPECT_EQ(pods("job-name=" + name).size(), 1u);
}

TEST_F(fiber_command_on_kubernetes, ps_logs_and_stop_follow_a_detached_run_and_stop_leaves_nothing) {
  auto name = start("held", FIBER_TEST_ORPHAN_MASTER);
  auto line = first_line(name);  // its child's pid, once the child runs
  ASSERT_FALSE(line.empty()) << "the master printed nothing";
  auto uid = master_uid(name);
  ASSERT_FALSE(uid.empty());
  // What `ps` counts: the worker's pod Running in the API server (CI once saw the child's pid
  // before the kubelet had said so).
  ASSERT_TRUE(a_worker_running_of(uid));
  auto ps = fiber("ps");
  EXPECT_EQ(ps.code, 0) << ps.out;
  ASSERT_NE(ps.out.find(name), std::string::npos) << ps.out;
  auto row = ps.out.substr(ps.out.find(name));
  row = row.substr(0, row.find('\n'));
  EXPECT_NE(row.find("running"), std::string::npos) << ps.out;
  EXPECT_TRUE(row.ends_with(" 1")) << "one running worker: " << row;
  auto logs = fiber("logs " + name);
  EXPECT_NE(logs.out.find(line), std::string::npos) << logs.out;
  auto stopped = fiber("stop " + name);
  EXPECT_EQ(stopped.code, 0) << stopped.out;
  // Gone when stop returns: the Job, its pod, and the worker its master made.
  EXPECT_EQ(job_status(name), 404);
  EXPECT_TRUE(pods("job-name=" + name).empty());
  EXPECT_TRUE(no_workers_of(uid));
  EXPECT_EQ(fiber("ps").out.find(name), std::string::npos);
  started_.clear();
}

TEST_F(fiber_command_on_kubernetes, dashboard_serves_a_runs_page_here_through_the_api_servers_proxy) {
  auto name = start("page", FIBER_TEST_ORPHAN_MASTER, "--dashboard");
  ASSERT_FALSE(first_line(name).empty()) << "the master printed no pid";
  // A reader of the namespace sees the master's log and its pod: the page's address, never its
  // token, which is in the run's Secret (read here as an admin, to know what to look for).
  auto secret = admin("GET", "/api/v1/namespaces/default/secrets/" + name + "-tokens");
  ASSERT_EQ(secret.status, 200) << secret.why;
  auto token = fiber::cli::token_in_secret(secret.body, "dashboard");
  ASSERT_EQ(token.size(), 32u);
  auto log = fiber("logs " + name);
  EXPECT_NE(log.out.find("fiber: dashboard of run"), std::string::npos) << log.out;
  EXPECT_EQ(log.out.find(token), std::string::npos) << "the page's token is in the master's log";
  auto pod = pods("job-name=" + name);
  ASSERT_EQ(pod.size(), 1u);
  EXPECT_EQ(boost::json::serialize(pod[0]).find(token), std::string::npos) << "the page's token is in the pod's spec";
  ::setenv("KUBECONFIG", kubeconfig().c_str(), 1);
  fiber_test::expect_orphan_masters_page(fiber_test::through_dashboard({"--backend", "kubernetes", "dashboard", name}),
                                         "kubernetes");
}

TEST_F(fiber_command_on_kubernetes, logs_follow_returns_when_the_run_ends_with_all_its_output) {
  auto name = start("logs", std::string(FIBER_TEST_EXIT_WITH) + " 0 first second");
  auto logs = fiber("logs -f " + name);
  EXPECT_EQ(logs.code, 0) << logs.out;
  EXPECT_NE(logs.out.find("argument 2: first"), std::string::npos) << logs.out;
  EXPECT_NE(logs.out.find("argument 3: second"), std::string::npos) << logs.out;
}

TEST_F(fiber_command_on_kubernetes, gc_removes_an_ended_run_and_the_workers_its_killed_master_left) {
  auto name = start("killed", FIBER_TEST_ORPHAN_MASTER);
  ASSERT_FALSE(first_line(name).empty());
  auto uid = master_uid(name);
  auto pod = pods("job-name=" + name);
  ASSERT_EQ(pod.size(), 1u);
  // SIGKILL to the master's container, from its node's containerd: it cleans nothing up, its pod
  // fails, and its worker stays (its owner, the failed pod, is still there).
  auto& container = pod[0].at("status").at("containerStatuses").at(0).as_object();
  auto [killed, why] = fiber_test::cluster_script(std::string("kill-container ") +
                                                  std::string(pod[0].at("spec").at("nodeName").as_string()) + " " +
                                                  std::string(container.at("containerID").as_string()));
  ASSERT_TRUE(killed) << why;
  ASSERT_TRUE(fiber_test::await_pods("job-name=" + name, [](const auto& all) {
    for (auto& [n, p] : all)
      if (p.at("status").as_object().if_contains("phase") && p.at("status").at("phase").as_string() == "Failed") return true;
    return false;
  }));
  int workers = 0;
  for (auto& p : pods("app.kubernetes.io/managed-by=fiber"))
    if (auto* owners = p.at("metadata").as_object().if_contains("ownerReferences"))
      for (auto& r : owners->as_array()) workers += r.at("uid").as_string() == uid;
  EXPECT_EQ(workers, 1) << "the killed master's worker is still there";
  auto ps = fiber("ps");
  EXPECT_NE(ps.out.find("failed"), std::string::npos) << ps.out;
  auto gc = fiber("gc");
  EXPECT_EQ(gc.code, 0) << gc.out;
  EXPECT_NE(gc.out.find("removing ended run " + name + " (failed)"), std::string::npos) << gc.out;
  EXPECT_EQ(job_status(name), 404);
  EXPECT_TRUE(no_workers_of(uid)) << "the killed master's worker";
  started_.clear();
}

TEST_F(fiber_command_on_kubernetes, a_durable_masters_pod_deleted_mid_map_is_made_again_by_its_job_and_takes_its_run_up) {
  auto name = unique("durable");
  fiber_test::durable_case c(name);
  // The run's files where this test sees them: the nodes' /tmp is this host's.
  start("durable", std::string(FIBER_TEST_DURABLE_PROGRAM) + " " + c.executions_file().string() + " " + c.gate().string(),
        "-v /tmp:/tmp --env FIBER_JOURNAL_DIR=" + c.journals().string() + " --durable --restarts 1");
  auto job = get("/apis/batch/v1/namespaces/default/jobs/" + started_.back());
  EXPECT_EQ(job.at("spec").at("backoffLimit").as_int64(), 1);
  fiber_test::wait_for_results(c.journals(), 2, 4);
  c.wait_for_both_at_the_gate();
  auto old = c.workers();
  auto before = c.executions();
  auto pod = pods("job-name=" + started_.back());
  ASSERT_EQ(pod.size(), 1u);
  auto deleted = admin("DELETE", "/api/v1/namespaces/default/pods/" + std::string(pod[0].at("metadata").at("name").as_string()));
  ASSERT_LT(deleted.status, 300) << deleted.status;
  fiber_test::durable_case::wait_for_end(old);  // the master and its workers (owned by its pod)
  c.wait_for_a_new_master(old);
  auto ps = fiber("ps").out;
  auto row = fiber_test::ps_row(ps, started_.back());
  EXPECT_NE(row.find("restart 1"), std::string::npos) << "ps does not say the Job made the master again: " << ps;
  c.open_gate();
  auto logs = fiber("logs -f " + started_.back());
  EXPECT_EQ(logs.code, 0) << logs.out;
  EXPECT_NE(logs.out.find("taken up again from its journal"), std::string::npos) << logs.out;
  EXPECT_NE(logs.out.find(fiber_test::uninterrupted), std::string::npos) << logs.out;
  fiber_test::expect_taken_up(before, c.executions());
  EXPECT_NE(fiber("ps").out.find(started_.back() + " "), std::string::npos);
}

// fiber cp through a helper pod: the user's image runs its fiber program as the claim copy
// service, reached through the API server's pod proxy; the pod goes after each copy.
TEST_F(fiber_command_on_kubernetes, cp_round_trips_a_folder_through_a_claim_and_leaves_no_helper_pod) {
  auto claim = unique("claim");
  ASSERT_EQ(admin("POST", "/api/v1/namespaces/default/persistentvolumeclaims",
                                  R"({"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":")" + claim +
                                      R"("},"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}}}})")
                .status,
            201);
  // A run first: the image and program of the newest run that ran are what the helper runs by
  // default. It is held running (TearDown stops it): `fiber gc` in a test beside this one removes
  // ended runs, and an ended run here was once gone before the copy looked for it. A run another
  // test starts in between may be the newest instead; each that runs is a fiber program of the
  // same build, which serves a claim as well. The steps that are not about the default name the
  // program (`own`).
  auto name = unique("cp-image");
  started_.push_back(name);
  auto run = fiber("run --build --registry " + registry_ + "/fibertest-kube " + small_workers + " --name " + name + " -- " +
                   FIBER_TEST_ORPHAN_MASTER);
  ASSERT_EQ(run.code, 0) << run.out;
  auto at = run.out.find("(image ");
  ASSERT_NE(at, std::string::npos) << run.out;
  auto image = run.out.substr(at + 7, run.out.find(')', at) - at - 7);
  auto own = " --image " + image + " --program " + fs::canonical(FIBER_TEST_ORPHAN_MASTER).string() + " ";
  ASSERT_FALSE(first_line(name).empty()) << "the held run runs";
  // A newer run that never starts (its image cannot be pulled) is not the default.
  auto pending = unique("cp-pending");
  started_.push_back(pending);
  auto never = fiber("run --image " + registry_ + "/fibertest-kube/no-such-image:1 --name " + pending + " -- " +
                     FIBER_TEST_EXIT_WITH);
  ASSERT_EQ(never.code, 0) << never.out;

  auto dir = fiber_test::run_folder() / claim;
  fs::create_directories(dir / "results" / "deep");
  std::ofstream(dir / "results" / "a.txt") << "alpha\n";
  std::ofstream(dir / "results" / "deep" / "b.bin") << std::string(100000, 'b');
  fs::permissions(dir / "results" / "deep", fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  auto in = fiber("cp " + (dir / "results").string() + " " + claim + ":/runs/");
  ASSERT_EQ(in.code, 0) << in.out;
  EXPECT_NE(in.out.find("copied 4 entries"), std::string::npos) << in.out;
  EXPECT_NE(in.out.find("the helper pod runs "), std::string::npos) << "which program, said up front: " << in.out;
  EXPECT_NE(in.out.find(" of your newest run that ran, "), std::string::npos) << in.out;
  EXPECT_EQ(in.out.find(pending), std::string::npos) << "a run that never started is not the default: " << in.out;
  auto out = fiber("cp --image " + image + " --program " + fs::canonical(FIBER_TEST_ORPHAN_MASTER).string() + " " + claim +
                   ":/runs/results " + (dir / "back").string());
  ASSERT_EQ(out.code, 0) << out.out;
  auto read = [](const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  EXPECT_EQ(read(dir / "back" / "a.txt"), "alpha\n");
  EXPECT_EQ(read(dir / "back" / "deep" / "b.bin"), std::string(100000, 'b'));
  EXPECT_EQ(fs::status(dir / "back" / "deep").permissions() & fs::perms::all,
            fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  auto no_helpers = [] { return fiber_test::await_pods("fiber.helper=cp", [](const auto& all) { return all.empty(); }); };
  EXPECT_TRUE(no_helpers()) << "the helper pods are removed";

  auto missing = fiber("cp" + own + claim + ":/no/such " + dir.string());
  EXPECT_EQ(missing.code, 125);
  EXPECT_NE(missing.out.find("claim " + claim + " has no 'no/such'"), std::string::npos) << missing.out;
  // Without the right to use the pod proxy: said, with what to grant.
  command_user_without no_proxy_update("update", "pods/proxy");
  ASSERT_TRUE(no_proxy_update.ready()) << "the API server did not take the service account's Role";
  auto denied = fiber("cp" + own + (dir / "results" / "a.txt").string() + " " + claim + ":/x",
                      "KUBECONFIG=" + no_proxy_update.kubeconfig());
  EXPECT_EQ(denied.code, 125);
  EXPECT_NE(denied.out.find("forbids reaching pod"), std::string::npos) << denied.out;
  EXPECT_NE(denied.out.find("pods/proxy"), std::string::npos) << denied.out;
  // A program the image does not hold: Kubernetes' words, and which flags chose it.
  auto wrong = fiber("cp --image " + image + " --program /no/such/program " + claim + ":/runs " + dir.string());
  EXPECT_EQ(wrong.code, 125);
  EXPECT_NE(wrong.out.find("cannot start"), std::string::npos) << wrong.out;
  EXPECT_NE(wrong.out.find("--program"), std::string::npos) << wrong.out;
  // A program that is no fiber program ends without serving: said, with what it printed.
  auto plain = unique("plain");
  started_.push_back(plain);
  auto built = fiber("run --build --registry " + registry_ + "/fibertest-kube --attach --name " + plain +
                     " -- /bin/echo not a fiber program");
  ASSERT_EQ(built.code, 0) << built.out;
  auto plain_at = built.out.find("(image ");
  ASSERT_NE(plain_at, std::string::npos) << built.out;
  auto plain_image = built.out.substr(plain_at + 7, built.out.find(')', plain_at) - plain_at - 7);
  auto not_fiber = fiber("cp --image " + plain_image + " --program " + fs::canonical("/bin/echo").string() + " " + claim +
                         ":/runs " + dir.string());
  EXPECT_EQ(not_fiber.code, 125);
  EXPECT_NE(not_fiber.out.find("which did not serve the claim"), std::string::npos) << not_fiber.out;
  EXPECT_NE(not_fiber.out.find("must be a fiber program whose main calls fiber::init"), std::string::npos) << not_fiber.out;
  EXPECT_EQ(not_fiber.out.find("could not start a child"), std::string::npos) << "the error code's words add nothing";
  EXPECT_TRUE(no_helpers()) << "removed after each failure too";
  // Ctrl-C while the helper starts: the command ends, and so does the pod.
  {
    auto env = fiber::detail::environment_with({{"KUBECONFIG", kubeconfig()}});
    auto child = fiber::detail::spawn_command(
        {FIBER_TEST_CLI, "--backend", "kubernetes", "cp", "--image", image, "--program",
         fs::canonical(FIBER_TEST_ORPHAN_MASTER).string(), claim + ":/runs", dir.string() + "/interrupted"},
        {.pipe_stderr = true, .env = &env});
    ASSERT_TRUE(fiber_test::await_pods("fiber.helper=cp", [](const auto& all) { return !all.empty(); }));
    ::kill(child.pid, SIGINT);
    std::string said;
    char buf[4096];
    for (ssize_t n; (n = ::read(child.stderr_fd, buf, sizeof buf)) > 0;) said.append(buf, static_cast<std::size_t>(n));
    ::close(child.stderr_fd);
    int status = 0;
    ::waitpid(child.pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 125) << said;
    EXPECT_NE(said.find("fiber cp was interrupted; its helper pod is removed"), std::string::npos) << said;
    EXPECT_TRUE(no_helpers()) << "removed after Ctrl-C";
  }
  admin("DELETE", "/api/v1/namespaces/default/persistentvolumeclaims/" + claim);
}

// A helper pod a killed `fiber cp` left (it ends by itself once idle): `fiber gc` removes it.
TEST_F(fiber_command_on_kubernetes, gc_removes_a_helper_pod_a_killed_fiber_cp_left) {
  auto name = unique("gc-cp-image");
  started_.push_back(name);
  auto run = fiber("run --build --registry " + registry_ + "/fibertest-kube --attach --name " + name + " -- " +
                   FIBER_TEST_EXIT_WITH + " 0");
  ASSERT_EQ(run.code, 0) << run.out;
  auto at = run.out.find("(image ");
  ASSERT_NE(at, std::string::npos) << run.out;
  auto image = run.out.substr(at + 7, run.out.find(')', at) - at - 7);
  auto no_helpers = [] { return fiber_test::await_pods("fiber.helper=cp", [](const auto& all) { return all.empty(); }); };
  auto leftover = unique("fiber-cp-left");
  auto* pw = ::getpwuid(::getuid());
  boost::json::object pod{
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", leftover}, {"labels", {{"fiber.helper", "cp"}, {"fiber.user", pw ? pw->pw_name : "root"}}}}},
      {"spec",
       {{"restartPolicy", "Never"},
        {"containers", boost::json::array{boost::json::object{
                           {"name", "copy"}, {"image", image}, {"command", {fs::canonical(FIBER_TEST_EXIT_WITH).string()}}}}}}}};
  ASSERT_EQ(admin("POST", "/api/v1/namespaces/default/pods", boost::json::serialize(pod)).status, 201);
  // ... and the Secret of its name that held its token.
  ASSERT_EQ(admin("POST", "/api/v1/namespaces/default/secrets",
                  R"({"metadata":{"name":")" + leftover + R"("},"stringData":{"token":"t"}})")
                .status,
            201);
  ASSERT_TRUE(fiber_test::await_pods("fiber.helper=cp", [](const auto& all) {
    for (auto& [n, p] : all)
      if (auto* phase = p.at("status").as_object().if_contains("phase"); phase && phase->as_string() == "Succeeded") return true;
    return false;
  }));
  auto gc = fiber("gc");
  EXPECT_EQ(gc.code, 0) << gc.out;
  EXPECT_NE(gc.out.find("removing fiber cp's helper pod " + leftover), std::string::npos) << gc.out;
  EXPECT_TRUE(no_helpers()) << gc.out;
  EXPECT_EQ(admin("GET", "/api/v1/namespaces/default/secrets/" + leftover).status, 404);
}

TEST_F(fiber_command_on_kubernetes, dry_run_prints_the_job_and_creates_nothing) {
  auto name = unique("dry");
  auto r = fiber("run --build --registry " + registry_ + "/x --dry-run --cpu 2 --memory 512M --gpu 1 -v data:/data:ro "
                 "--env A=1 --name " + name + " -- " + FIBER_TEST_EXIT_WITH + " 7");
  ASSERT_EQ(r.code, 0) << r.out;
  auto plan = boost::json::parse(r.out).as_object();
  auto& job = plan.at("create").as_object();
  EXPECT_EQ(job.at("kind").as_string(), "Job");
  EXPECT_EQ(job.at("spec").at("backoffLimit").as_int64(), 0);
  auto& pod = job.at("spec").at("template").at("spec").as_object();
  EXPECT_EQ(pod.at("restartPolicy").as_string(), "Never");
  auto& container = pod.at("containers").at(0).as_object();
  EXPECT_EQ(container.at("resources").at("limits").at("cpu").as_string(), "2000m");
  EXPECT_EQ(container.at("resources").at("limits").at("memory").as_string(), std::to_string(512LL << 20));
  EXPECT_EQ(container.at("resources").at("limits").at("nvidia.com/gpu").as_string(), "1");
  EXPECT_EQ(pod.at("volumes").at(0).at("persistentVolumeClaim").at("claimName").as_string(), "data");
  auto env = boost::json::serialize(container.at("env"));
  for (auto* want : {"FIBER_BACKEND", "FIBER_POD_IP", "FIBER_VOLUMES", "data:/data:ro", "\"A\""})
    EXPECT_NE(env.find(want), std::string::npos) << want << " in " << env;
  EXPECT_EQ(plan.at("build").at("context").as_string(), "generated: the program and its libraries");
  EXPECT_EQ(job_status(name), 404);
}

TEST_F(fiber_command_on_kubernetes, bad_input_is_an_error_that_names_the_problem_and_the_fix) {
  auto expect_error = [](const command_outcome& r, const std::string& words) {
    EXPECT_EQ(r.code, 125) << r.out;
    EXPECT_NE(r.out.find(words), std::string::npos) << r.out;
  };
  auto program = std::string(" -- ") + FIBER_TEST_EXIT_WITH;
  auto build = "run --build --registry " + registry_ + "/fibertest-kube ";
  expect_error(fiber("run --build" + program), "--build on Kubernetes needs --registry");
  expect_error(fiber(build + "-v no-such-claim" + program), "no PersistentVolumeClaim named 'no-such-claim'");
  expect_error(fiber(build + "--name Upper-Case" + program), "cannot name a Kubernetes Job");
  expect_error(fiber(build + program, "FIBER_KUBERNETES_SERVICE_ACCOUNT=nobody"),
               "no service account 'nobody' in namespace default: the master needs one allowed to manage pods: "
               "kubectl apply -n default -f containers/kubernetes/rbac.yaml");
  // What the cluster cannot do is said, and the run does not stay behind.
  auto missing = unique("missing");
  expect_error(fiber("run --attach --name " + missing + " --image " + registry_ + "/fibertest-kube/no-such-image:1" + program),
               "cannot start: ErrImagePull");
  EXPECT_EQ(job_status(missing), 404);
  auto greedy = unique("greedy");
  auto gpu = fiber(build + "--attach --gpu 1 --name " + greedy + program);
  expect_error(gpu, "Kubernetes cannot schedule its pod");
  EXPECT_NE(gpu.out.find("Insufficient nvidia.com/gpu"), std::string::npos) << gpu.out;
  EXPECT_NE(gpu.out.find("the run was removed"), std::string::npos) << gpu.out;
  expect_error(fiber("logs no-such-run-here"), "no run named 'no-such-run-here'");
  expect_error(fiber("stop no-such-run-here"), "`fiber ps --backend kubernetes` lists yours");
  expect_error(fiber("cp /etc/hostname no-such-claim:/x"), "no PersistentVolumeClaim named 'no-such-claim' in namespace default");
  expect_error(fiber("cp --image some/image:1 /etc/hostname data:/x"), "--image some/image:1 needs --program");
  // An API server that does not answer.
  auto conf = (fiber_test::run_folder() / "unreachable-kubeconfig").string();
  std::ofstream(conf) << R"({"apiVersion":"v1","kind":"Config","current-context":"c",)"
                      << R"("clusters":[{"name":"k","cluster":{"server":"https://127.0.0.1:1"}}],)"
                      << R"("users":[{"name":"u","user":{"token":"t"}}],)"
                      << R"("contexts":[{"name":"c","context":{"cluster":"k","user":"u"}}]})";
  expect_error(fiber("ps", "KUBECONFIG=" + conf), "the Kubernetes API server at https://127.0.0.1:1 did not answer");
}
