// How the kubernetes backend reaches and authenticates to an API server: inside a pod, the pod's
// service account; outside, a kubeconfig (its current context or the one configured).
#pragma once
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace fiber {
struct config;
}

namespace fiber::detail {
struct http_request;
}

namespace fiber::detail::kube {

/// A kubeconfig user's `exec` credential plugin.
struct exec_plugin {
  std::string command;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  std::string api_version = "client.authentication.k8s.io/v1";
};

/// Where bearer tokens come from. Tokens rotate (projected service-account tokens, short-lived
/// cloud tokens), so a file is read again every minute and a plugin run again when its token
/// expires, and both after the server answered 401. Thread-safe.
class token_source {
 public:
  static std::shared_ptr<token_source> none();
  static std::shared_ptr<token_source> fixed(std::string token);
  static std::shared_ptr<token_source> file(std::string path);
  static std::shared_ptr<token_source> exec(exec_plugin plugin);

  /// The token to send now; empty: none. fiber::error(config_error) when the file cannot be read
  /// or the plugin fails, naming it.
  std::string token();
  /// The server refused the last token: the next token() reads the file or runs the plugin again.
  void refused();
  /// True when a refused token may be replaced by a new one (a file or a plugin).
  bool can_renew() const noexcept { return kind_ != kind::none && kind_ != kind::fixed; }
  /// For messages: "the token file /path", "the exec plugin aws", ...
  std::string describe() const;

 private:
  enum class kind { none, fixed, file, exec };
  explicit token_source(kind k) : kind_(k) {}
  void renew();

  kind kind_;
  std::string value_, path_;
  exec_plugin plugin_;
  std::mutex m_;
  std::chrono::steady_clock::time_point read_at_{}, expires_at_ = std::chrono::steady_clock::time_point::max();
  bool stale_ = true;
};

struct access {
  std::string server;                 // https://host:port
  std::string ca_pem, ca_file;        // the server's CA (in memory or a file); empty: the system's
  std::string cert_pem, cert_file;    // a client certificate
  std::string key_pem, key_file;
  bool insecure = false;              // insecure-skip-tls-verify
  std::shared_ptr<token_source> tokens = token_source::none();
  std::string namespace_;             // the context's or the pod's; empty: none said
  bool in_cluster = false;
  std::string source;                 // for messages: "the service account of this pod", "kubeconfig X, context Y"

  /// Fills a request's URL (server + `path`), TLS settings and Authorization header.
  void prepare(http_request& req, const std::string& path) const;
};

/// The service account mounted into every pod (`dir` holds token, ca.crt, namespace); the server
/// from KUBERNETES_SERVICE_HOST/PORT.
access in_cluster_access(const std::string& dir = "/var/run/secrets/kubernetes.io/serviceaccount");
/// A kubeconfig file (YAML or JSON): `context`, or its current-context when empty.
access kubeconfig_access(const std::string& path, const std::string& context);
/// In a pod (KUBERNETES_SERVICE_HOST set and a service-account token mounted) the pod's account;
/// else the kubeconfig named by $KUBECONFIG (its first file), else ~/.kube/config. An error
/// naming what is missing and what to set when there is neither.
access find_access(const fiber::config& cfg);

}  // namespace fiber::detail::kube
