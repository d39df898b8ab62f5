// The pod a Kubernetes child runs in, checked as JSON without a cluster: what Kubernetes would do
// with a field is the cluster suites' part (kubernetes:<suite>), what fiber writes is this one's.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "backend/kubernetes/keys_secret.hpp"
#include "backend/kubernetes/pod_manifest.hpp"

namespace kube = fiber::detail::kube;

namespace {

boost::json::object container_of(const kube::pod_settings& s, const fiber::detail::spawn_spec& spec) {
  auto pod = kube::pod_manifest(s, spec, "fiber-job-1-process-1", "job");
  return pod.at("spec").at("containers").as_array().at(0).as_object();
}

std::string env_value(const boost::json::object& container, std::string_view name) {
  for (auto& e : container.at("env").as_array())
    if (e.at("name").as_string() == name) return std::string(e.at("value").as_string());
  return "(missing)";
}

}  // namespace

TEST(pod_manifest, every_dollar_is_doubled_so_kubernetes_passes_it_on_unchanged) {
  // Kubernetes reduces $$ to $ and expands $(NAME): the program must get what was given.
  fiber::detail::spawn_spec spec;
  spec.name = "Process-1";
  spec.executable = "/opt/a$b/program";
  spec.args = {"x$$y", "$(HOME)", "plain"};
  spec.env = {{"FIBER_WORKER_NAME", "a$$b"}, {"REF", "$(PATH)"}};
  auto c = container_of({.image = "img"}, spec);
  auto& command = c.at("command").as_array();
  ASSERT_EQ(command.size(), 4u);
  EXPECT_EQ(command[0].as_string(), "/opt/a$$b/program");
  EXPECT_EQ(command[1].as_string(), "x$$$$y");
  EXPECT_EQ(command[2].as_string(), "$$(HOME)");
  EXPECT_EQ(command[3].as_string(), "plain");
  EXPECT_EQ(env_value(c, "FIBER_WORKER_NAME"), "a$$$$b");
  EXPECT_EQ(env_value(c, "REF"), "$$(PATH)");
}

TEST(pod_manifest, a_literal_reads_back_as_the_text_it_stands_for) {
  for (std::string text : {"", "$", "$$", "a$(B)c", "$$$", "no dollars", "end$"})
    EXPECT_EQ(kube::from_kube_literal(kube::kube_literal(text)), text) << text;
}

TEST(pod_manifest, a_worker_gets_no_service_account_token_unless_the_user_names_an_account) {
  fiber::detail::spawn_spec spec;
  spec.name = "Process-1";
  spec.executable = "/bin/true";
  auto plain = kube::pod_manifest({.image = "img"}, spec, "fiber-job-1-process-1", "job").at("spec").as_object();
  EXPECT_EQ(plain.at("automountServiceAccountToken"), false);
  EXPECT_FALSE(plain.contains("serviceAccountName"));
  auto named =
      kube::pod_manifest({.image = "img", .service_account = "trainer"}, spec, "fiber-job-1-process-1", "job").at("spec").as_object();
  EXPECT_EQ(named.at("serviceAccountName"), "trainer");
  EXPECT_FALSE(named.contains("automountServiceAccountToken"));
}

// A reader of the namespace sees the pod's spec: it names the Secret and the file, and holds no
// credentials, which the backend keeps in spawn_spec::secret, apart from the env.
TEST(pod_manifest, the_credentials_are_a_mounted_secret_and_the_env_says_only_where) {
  fiber::detail::spawn_spec spec;
  spec.name = "Process-1";
  spec.executable = "/bin/true";
  spec.secret = "curve,never-in-the-spec";
  auto pod = kube::pod_manifest({.image = "img"}, spec, "fiber-job-1-process-1", "job", "fiber-job-keys-1");
  EXPECT_EQ(boost::json::serialize(pod).find("never-in-the-spec"), std::string::npos);
  auto& c = pod.at("spec").at("containers").as_array().at(0).as_object();
  EXPECT_EQ(env_value(c, "FIBER_WORKER_KEYS_FILE"), "/var/run/fiber-keys/keys");
  auto& volume = pod.at("spec").at("volumes").as_array().back().as_object();
  EXPECT_EQ(volume.at("secret").at("secretName"), "fiber-job-keys-1");
  auto& mount = c.at("volumeMounts").as_array().back().as_object();
  EXPECT_EQ(mount.at("mountPath"), "/var/run/fiber-keys");
  EXPECT_EQ(mount.at("readOnly"), true);
  // Without a Secret (a spec with no credentials), nothing is mounted.
  auto bare = kube::pod_manifest({.image = "img"}, spec, "fiber-job-1-process-1", "job");
  EXPECT_FALSE(bare.at("spec").as_object().contains("volumes"));
}

TEST(pod_manifest, the_keys_secret_is_the_jobs_owned_as_its_pods_and_immutable) {
  kube::pod_settings s{.image = "img"};
  s.owner = kube::owner_pod{"master-pod", "uid-1"};
  s.master_mark = "host:42";
  auto secret = kube::keys_secret_manifest(s, "fiber-job-keys-1", "job", "curve,k");
  EXPECT_EQ(secret.at("kind"), "Secret");
  EXPECT_EQ(secret.at("immutable"), true);
  EXPECT_EQ(secret.at("stringData").at("keys"), "curve,k");
  auto& meta = secret.at("metadata").as_object();
  EXPECT_EQ(meta.at("labels").at("fiber.job"), "job");
  EXPECT_EQ(meta.at("labels").at("app.kubernetes.io/managed-by"), "fiber");
  EXPECT_EQ(meta.at("ownerReferences").as_array().at(0).at("uid"), "uid-1");
  EXPECT_EQ(meta.at("annotations").at("fiber.master"), "host:42");
}

TEST(pod_manifest, cpus_are_requests_and_limits_unless_a_cpu_request_is_set) {
  fiber::detail::spawn_spec spec;
  spec.name = "Process-1";
  spec.executable = "/bin/true";
  spec.cpu = 2;
  spec.memory_mb = 64;
  auto guaranteed = container_of({.image = "img"}, spec).at("resources").as_object();
  EXPECT_EQ(guaranteed.at("requests").at("cpu").as_string(), "2");
  EXPECT_EQ(guaranteed.at("limits").at("cpu").as_string(), "2");
  EXPECT_EQ(guaranteed.at("requests").at("memory").as_string(), "64Mi");
  auto shared = container_of({.image = "img", .cpu_request = "100m"}, spec).at("resources").as_object();
  EXPECT_EQ(shared.at("requests").at("cpu").as_string(), "100m");
  EXPECT_EQ(shared.at("limits").at("cpu").as_string(), "2");
  EXPECT_EQ(shared.at("requests").at("memory").as_string(), "64Mi");
}
