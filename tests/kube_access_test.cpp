// How the kubernetes backend finds and authenticates to an API server (src/backend/kubernetes/
// kube_access): kubeconfig files of every shape users have (contexts, CA and client certificates
// inline or in files, tokens, token files, exec credential plugins) and a pod's service account.
// No server needed: what is read lands in the request the backend would send.
#include <fiber/config.hpp>
#include <fiber/error.hpp>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "backend/kubernetes/kube_access.hpp"
#include "support.hpp"
#include "transport/http_client.hpp"

namespace {

namespace kube = fiber::detail::kube;
namespace fs = std::filesystem;

class kube_access_test : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fiber_test::run_folder() / ("fiber-kube-access-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    fs::remove_all(dir_);
    ::unsetenv("KUBERNETES_SERVICE_HOST");
    ::unsetenv("KUBERNETES_SERVICE_PORT");
  }
  std::string write(const std::string& name, const std::string& text, bool executable = false) {
    auto path = dir_ / name;
    std::ofstream(path) << text;
    if (executable) fs::permissions(path, fs::perms::owner_all);
    return path.string();
  }
  static fiber::detail::http_request prepared(const kube::access& a) {
    fiber::detail::http_request req;
    a.prepare(req, "/api/v1/namespaces/default/pods");
    return req;
  }
  static std::string authorization(const fiber::detail::http_request& req) {
    for (auto& [k, v] : req.headers)
      if (k == "Authorization") return v;
    return {};
  }
  fs::path dir_;
};

// "-----BEGIN CERTIFICATE-----\nCA\n" and friends, base64-encoded as kubeconfigs hold them.
constexpr const char* ca_b64 = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkNBCg==";
constexpr const char* ca_text = "-----BEGIN CERTIFICATE-----\nCA\n";

TEST_F(kube_access_test, the_current_context_gives_server_ca_namespace_and_token) {
  auto path = write("config", std::string(R"(apiVersion: v1
kind: Config
current-context: work
clusters:
- name: prod
  cluster:
    server: https://prod.example:6443/
    certificate-authority-data: )") + ca_b64 + R"(
- name: lab
  cluster:
    server: https://lab.example:6443
    insecure-skip-tls-verify: true
contexts:
- name: work
  context: {cluster: prod, user: alice, namespace: research}
- name: play
  context: {cluster: lab, user: bob}
users:
- name: alice
  user: {token: alice-token}
- name: bob
  user: {token: bob-token}
)");
  auto a = kube::kubeconfig_access(path, "");
  EXPECT_EQ(a.server, "https://prod.example:6443");  // the trailing slash goes
  EXPECT_EQ(a.ca_pem, ca_text);
  EXPECT_EQ(a.namespace_, "research");
  EXPECT_FALSE(a.insecure);
  EXPECT_FALSE(a.in_cluster);
  auto req = prepared(a);
  EXPECT_EQ(req.url, "https://prod.example:6443/api/v1/namespaces/default/pods");
  EXPECT_EQ(req.ca_pem, ca_text);
  EXPECT_TRUE(req.verify_tls);
  EXPECT_EQ(authorization(req), "Bearer alice-token");

  // kubernetes_context picks another.
  auto b = kube::kubeconfig_access(path, "play");
  EXPECT_EQ(b.server, "https://lab.example:6443");
  EXPECT_TRUE(b.insecure);
  EXPECT_FALSE(prepared(b).verify_tls);
  EXPECT_EQ(authorization(prepared(b)), "Bearer bob-token");
  EXPECT_EQ(b.namespace_, "");
  fiber_test::expect_error([&] { (void)kube::kubeconfig_access(path, "nope"); }, fiber::errc::config_error,
                           {"no context 'nope'", "kubernetes_context"});
}

TEST_F(kube_access_test, client_certificates_inline_or_in_files_relative_to_the_kubeconfig) {
  write("client.crt", "CERT");
  write("client.key", "KEY");
  write("ca.crt", "CA");
  auto path = write("config", R"({"current-context": "c",
    "clusters": [{"name": "k", "cluster": {"server": "https://10.0.0.1", "certificate-authority": "ca.crt"}}],
    "contexts": [{"name": "c", "context": {"cluster": "k", "user": "files"}},
                 {"name": "d", "context": {"cluster": "k", "user": "inline"}}],
    "users": [{"name": "files", "user": {"client-certificate": "client.crt", "client-key": "/abs/client.key"}},
              {"name": "inline", "user": {"client-certificate-data": "Q0VSVA==", "client-key-data": "S0VZ"}}]})");
  // JSON is YAML: kubeconfigs written by tools come in both.
  auto files = prepared(kube::kubeconfig_access(path, ""));
  EXPECT_EQ(files.ca_file, (dir_ / "ca.crt").string());
  EXPECT_EQ(files.cert_file, (dir_ / "client.crt").string());
  EXPECT_EQ(files.key_file, "/abs/client.key");
  EXPECT_EQ(authorization(files), "");
  auto inline_ = prepared(kube::kubeconfig_access(path, "d"));
  EXPECT_EQ(inline_.cert_pem, "CERT");
  EXPECT_EQ(inline_.key_pem, "KEY");
}

TEST_F(kube_access_test, a_token_file_is_read_again_after_a_refusal) {
  auto token = write("token", "first\n");
  auto path = write("config", "current-context: c\nclusters: [{name: k, cluster: {server: 'https://k'}}]\n"
                              "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
                              "users: [{name: u, user: {tokenFile: token}}]\n");
  auto a = kube::kubeconfig_access(path, "");
  EXPECT_TRUE(a.tokens->can_renew());
  EXPECT_EQ(authorization(prepared(a)), "Bearer first");
  write("token", "second\n");
  EXPECT_EQ(authorization(prepared(a)), "Bearer first");  // read once a minute ...
  a.tokens->refused();
  EXPECT_EQ(authorization(prepared(a)), "Bearer second");  // ... and after the server said 401
  EXPECT_NE(a.tokens->describe().find(token), std::string::npos);
}

TEST_F(kube_access_test, an_exec_plugin_runs_with_its_args_and_env_and_again_when_its_token_expires) {
  // The plugin counts its runs and prints an ExecCredential whose token has already expired, so
  // every use runs it again; its args and env reach it, and it is told it is not interactive.
  auto runs = (dir_ / "runs").string();
  auto plugin = write("plugin.sh",
                      "#!/bin/sh\n"
                      "echo x >> " + runs + "\n"
                      "n=$(wc -l < " + runs + ")\n"
                      "case \"$KUBERNETES_EXEC_INFO\" in *'\"interactive\":false'*) ;; *) exit 3;; esac\n"
                      "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
                      "\"status\":{\"token\":\"%s-%s-%s\",\"expirationTimestamp\":\"2001-01-01T00:00:00Z\"}}' "
                      "\"$1\" \"$CLOUD_REGION\" \"$n\"\n",
                      true);
  auto path = write("config", "current-context: c\nclusters: [{name: k, cluster: {server: 'https://k'}}]\n"
                              "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
                              "users:\n- name: u\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
                              "      command: " + plugin + "\n      args: [get-token]\n"
                              "      env: [{name: CLOUD_REGION, value: north}]\n");
  auto a = kube::kubeconfig_access(path, "");
  EXPECT_EQ(authorization(prepared(a)), "Bearer get-token-north-1");
  EXPECT_EQ(authorization(prepared(a)), "Bearer get-token-north-2");
}

// Another user of the host reads every process's argv (/proc/PID/cmdline): a value of the
// kubeconfig's plugin env (often a credential) must reach the plugin only through its environment.
// An `env` program first on PATH records any argv it is handed, as such a reader would.
TEST_F(kube_access_test, an_exec_plugins_env_values_never_appear_on_a_command_line) {
  auto seen = (dir_ / "argv_seen").string();
  fs::create_directories(dir_ / "bin");
  write("bin/env", "#!/bin/sh\necho \"$@\" >> " + seen + "\nexec /usr/bin/env \"$@\"\n", true);
  auto plugin = write("plugin.sh",
                      "#!/bin/sh\necho \"$0 $*\" >> " + seen + "\n"
                      "printf '{\"kind\":\"ExecCredential\",\"status\":{\"token\":\"%s\"}}' \"$VAULT_SECRET\"\n",
                      true);
  auto path = write("config", "current-context: c\nclusters: [{name: k, cluster: {server: 'https://k'}}]\n"
                              "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
                              "users:\n- name: u\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
                              "      command: " + plugin + "\n      args: [get-token]\n"
                              "      env: [{name: VAULT_SECRET, value: s3cr3t-value}]\n");
  std::string old_path = std::getenv("PATH") ? std::getenv("PATH") : "";
  ::setenv("PATH", ((dir_ / "bin").string() + ":" + old_path).c_str(), 1);
  auto a = kube::kubeconfig_access(path, "");
  auto auth = authorization(prepared(a));
  ::setenv("PATH", old_path.c_str(), 1);
  EXPECT_EQ(auth, "Bearer s3cr3t-value");
  std::ifstream in(seen);
  std::string argvs((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(argvs.find("get-token"), std::string::npos) << "the plugin ran with its args";
  EXPECT_EQ(argvs.find("s3cr3t-value"), std::string::npos) << argvs;
}

TEST_F(kube_access_test, an_exec_plugin_that_fails_or_prints_no_credential_is_named) {
  auto failing = write("failing.sh", "#!/bin/sh\necho 'please log in' >&2\nexit 1\n", true);
  auto silent = write("silent.sh", "#!/bin/sh\necho '{}'\n", true);
  auto config = [&](const std::string& command) {
    return write("config", "current-context: c\nclusters: [{name: k, cluster: {server: 'https://k'}}]\n"
                           "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
                           "users: [{name: u, user: {exec: {command: " + command + "}}}]\n");
  };
  auto a = kube::kubeconfig_access(config(failing), "");
  fiber_test::expect_error([&] { (void)prepared(a); }, fiber::errc::config_error, {"failing.sh", "failed"});
  auto b = kube::kubeconfig_access(config(silent), "");
  fiber_test::expect_error([&] { (void)prepared(b); }, fiber::errc::config_error, {"silent.sh", "status.token"});
}

TEST_F(kube_access_test, what_is_missing_or_unsupported_is_named_with_the_fix) {
  fiber_test::expect_error([&] { (void)kube::kubeconfig_access((dir_ / "absent").string(), ""); },
                           fiber::errc::config_error, {"no kubeconfig", "KUBECONFIG"});
  auto bad = write("bad", "clusters: [unclosed\n");
  fiber_test::expect_error([&] { (void)kube::kubeconfig_access(bad, ""); }, fiber::errc::config_error, "not valid YAML");
  auto no_context = write("nocontext", "clusters: []\n");
  fiber_test::expect_error([&] { (void)kube::kubeconfig_access(no_context, ""); }, fiber::errc::config_error,
                           {"no current-context", "kubectl config use-context"});
  auto provider = write("provider", "current-context: c\nclusters: [{name: k, cluster: {server: 'https://k'}}]\n"
                                    "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
                                    "users: [{name: u, user: {auth-provider: {name: gcp}}}]\n");
  fiber_test::expect_error([&] { (void)kube::kubeconfig_access(provider, ""); }, fiber::errc::config_error,
                           {"auth-provider", "exec credential plugin"});
  auto no_server = write("noserver", "current-context: c\nclusters: [{name: k, cluster: {}}]\n"
                                     "contexts: [{name: c, context: {cluster: k}}]\n");
  fiber_test::expect_error([&] { (void)kube::kubeconfig_access(no_server, ""); }, fiber::errc::config_error, "no server");
  auto dangling = write("dangling", "current-context: c\nclusters: [{name: k, cluster: {server: 'https://k'}}]\n"
                                    "contexts: [{name: c, context: {cluster: gone, user: u}},"
                                    " {name: d, context: {cluster: k, user: gone}}]\n");
  fiber_test::expect_error([&] { (void)kube::kubeconfig_access(dangling, ""); }, fiber::errc::config_error,
                           "no cluster 'gone'");
  fiber_test::expect_error([&] { (void)kube::kubeconfig_access(dangling, "d"); }, fiber::errc::config_error,
                           "no user 'gone'");
}

TEST_F(kube_access_test, a_pods_service_account_gives_server_ca_namespace_and_a_token_read_again) {
  write("token", "sa-1");
  write("ca.crt", "CA");
  write("namespace", "team-a\n");
  ::setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", "6443", 1);
  auto a = kube::in_cluster_access(dir_.string());
  EXPECT_TRUE(a.in_cluster);
  EXPECT_EQ(a.server, "https://[fd00::1]:6443");
  EXPECT_EQ(a.namespace_, "team-a");
  auto req = prepared(a);
  EXPECT_EQ(req.ca_file, (dir_ / "ca.crt").string());
  EXPECT_EQ(authorization(req), "Bearer sa-1");
  write("token", "sa-2");  // projected tokens rotate
  a.tokens->refused();
  EXPECT_EQ(authorization(prepared(a)), "Bearer sa-2");
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  fiber_test::expect_error([&] { (void)kube::in_cluster_access(dir_.string()); }, fiber::errc::config_error,
                           "KUBERNETES_SERVICE_HOST");
}

TEST_F(kube_access_test, outside_a_pod_the_first_file_of_KUBECONFIG_is_read) {
  auto path = write("config", "current-context: c\nclusters: [{name: k, cluster: {server: 'https://first'}}]\n"
                              "contexts: [{name: c, context: {cluster: k}}]\n");
  std::string saved = std::getenv("KUBECONFIG") ? std::getenv("KUBECONFIG") : "";
  ::setenv("KUBECONFIG", (path + ":/elsewhere/config").c_str(), 1);
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  auto a = kube::find_access(fiber::config::load({{"backend", "local"}}));
  if (saved.empty()) ::unsetenv("KUBECONFIG");
  else ::setenv("KUBECONFIG", saved.c_str(), 1);
  EXPECT_EQ(a.server, "https://first");
  EXPECT_FALSE(a.in_cluster);
  EXPECT_NE(a.source.find(path), std::string::npos) << a.source;
}

}  // namespace
