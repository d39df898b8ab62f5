#include "backend/kubernetes/kube_access.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "backend/command.hpp"
#include "core/yaml_value.hpp"
#include "fiber/config.hpp"
#include "fiber/error.hpp"
#include "transport/http_client.hpp"

namespace fiber::detail::kube {
namespace {

using clock = std::chrono::steady_clock;
/// Projected service-account tokens rotate; client libraries re-read them at least this often.
constexpr auto token_file_period = std::chrono::seconds(60);

[[noreturn]] void config_problem(const std::string& what) { throw error(errc::config_error, what); }

std::string read_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) config_problem("cannot read " + what + " " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n')) ++i;
  return s.substr(i);
}

std::string base64_decode(const std::string& in, const std::string& what) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
  };
  std::string out;
  unsigned acc = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=' || c == '\n' || c == '\r' || c == ' ') continue;
    int v = value(c);
    if (v < 0) config_problem(what + " is not base64");
    acc = (acc << 6) | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return out;
}

/// RFC 3339 ("2026-11-23T20:00:00Z") as a steady-clock deadline; max() when unreadable.
clock::time_point deadline_of(const std::string& stamp) {
  std::tm tm{};
  if (!::strptime(stamp.c_str(), "%Y-%m-%dT%H:%M:%S", &tm)) return clock::time_point::max();
  auto at = ::timegm(&tm);
  auto left = std::chrono::seconds(at - std::time(nullptr));
  return clock::now() + left;
}

std::string home_kubeconfig() {
  if (const char* k = std::getenv("KUBECONFIG"); k && *k) {
    std::string list = k;
    return list.substr(0, list.find(':'));
  }
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "") + "/.kube/config";
}

}  // namespace

// ------------------------------------------------------------------ token_source

std::shared_ptr<token_source> token_source::none() { return std::shared_ptr<token_source>(new token_source(kind::none)); }
std::shared_ptr<token_source> token_source::fixed(std::string token) {
  auto t = std::shared_ptr<token_source>(new token_source(kind::fixed));
  t->value_ = std::move(token);
  t->stale_ = false;
  return t;
}
std::shared_ptr<token_source> token_source::file(std::string path) {
  auto t = std::shared_ptr<token_source>(new token_source(kind::file));
  t->path_ = std::move(path);
  return t;
}
std::shared_ptr<token_source> token_source::exec(exec_plugin plugin) {
  auto t = std::shared_ptr<token_source>(new token_source(kind::exec));
  t->plugin_ = std::move(plugin);
  return t;
}

std::string token_source::token() {
  std::lock_guard lock(m_);
  auto now = clock::now();
  bool due = stale_ || (kind_ == kind::file && now - read_at_ >= token_file_period) ||
             (kind_ == kind::exec && now + std::chrono::seconds(10) >= expires_at_);
  if (due && (kind_ == kind::file || kind_ == kind::exec)) renew();
  return value_;
}

void token_source::refused() {
  std::lock_guard lock(m_);
  stale_ = true;
}

std::string token_source::describe() const {
  switch (kind_) {
    case kind::none: return "no credentials";
    case kind::fixed: return "the kubeconfig's token";
    case kind::file: return "the token file " + path_;
    case kind::exec: return "the exec credential plugin '" + plugin_.command + "'";
  }
  return {};
}

void token_source::renew() {
  if (kind_ == kind::file) {
    value_ = trim(read_file(path_, "the token file"));
  } else {
    // The client.authentication.k8s.io protocol: ExecCredential in, ExecCredential out. The
    // kubeconfig's values (often credentials) go to the plugin's environment, which only this
    // user reads, never onto a command line, which every user of the host can read.
    std::vector<std::pair<std::string, std::string>> added{
        {"KUBERNETES_EXEC_INFO", "{\"apiVersion\":\"" + plugin_.api_version +
                                     "\",\"kind\":\"ExecCredential\",\"spec\":{\"interactive\":false}}"}};
    added.insert(added.end(), plugin_.env.begin(), plugin_.env.end());
    auto env = environment_with(added);
    std::vector<std::string> argv{plugin_.command};
    argv.insert(argv.end(), plugin_.args.begin(), plugin_.args.end());
    auto r = run_command(argv, {}, std::chrono::seconds(60), &env);
    if (!r.ok()) config_problem("the kubeconfig's exec credential plugin '" + plugin_.command + "' failed: " + r.problem());
    std::error_code ec;
    auto v = boost::json::parse(r.out, ec);
    const boost::json::value* token = nullptr;
    if (!ec && v.is_object())
      if (auto* status = v.as_object().if_contains("status"); status && status->is_object())
        token = status->as_object().if_contains("token");
    // What it printed is shown only when it is no JSON at all (a message): a credential of
    // another shape may hold secrets, which an error message must not carry.
    if (!token || !token->is_string())
      config_problem("the kubeconfig's exec credential plugin '" + plugin_.command +
                     "' did not print an ExecCredential with status.token" +
                     (ec ? " (it printed: " + r.out.substr(0, 200) + ")" : std::string(" (it printed JSON of another shape)")));
    value_ = std::string(token->as_string());
    expires_at_ = clock::time_point::max();
    if (auto* exp = v.as_object().at("status").as_object().if_contains("expirationTimestamp"); exp && exp->is_string())
      expires_at_ = deadline_of(std::string(exp->as_string()));
  }
  read_at_ = clock::now();
  stale_ = false;
}

// ------------------------------------------------------------------ access

void access::prepare(http_request& req, const std::string& path) const {
  req.url = server + path;
  req.ca_pem = ca_pem;
  req.ca_file = ca_file;
  req.cert_pem = cert_pem;
  req.cert_file = cert_file;
  req.key_pem = key_pem;
  req.key_file = key_file;
  req.verify_tls = !insecure;
  if (auto t = tokens->token(); !t.empty()) req.headers.emplace_back("Authorization", "Bearer " + t);
}

access in_cluster_access(const std::string& dir) {
  access a;
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (!host || !*host)
    config_problem("not in a Kubernetes pod: KUBERNETES_SERVICE_HOST is not set");
  std::string h = host;
  if (h.find(':') != std::string::npos) h = "[" + h + "]";  // IPv6
  a.server = "https://" + h + ":" + (port && *port ? port : "443");
  a.ca_file = dir + "/ca.crt";
  a.tokens = token_source::file(dir + "/token");
  std::error_code ec;
  if (std::filesystem::exists(dir + "/namespace", ec)) a.namespace_ = trim(read_file(dir + "/namespace", "the namespace file"));
  a.in_cluster = true;
  a.source = "the service account of this pod (" + dir + ")";
  return a;
}

namespace {
// A kubeconfig's fields, read from its YAML as a JSON value.
/// A field of a mapping; null when the node is no mapping or lacks it.
const boost::json::value& field(const boost::json::value& n, const char* key) {
  static const boost::json::value absent;
  const auto* o = n.if_object();
  if (o == nullptr) return absent;
  auto it = o->find(key);
  return it == o->end() ? absent : it->value();
}
/// A text field; empty when absent or not text.
std::string str(const boost::json::value& n, const char* key) {
  const auto& v = field(n, key);
  return v.is_string() ? std::string(v.get_string()) : std::string();
}
/// A list field; empty when absent or not a list.
const boost::json::array& items(const boost::json::value& n, const char* key) {
  static const boost::json::array none;
  const auto* a = field(n, key).if_array();
  return a ? *a : none;
}
boost::json::value read_kubeconfig(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    config_problem("no kubeconfig at " + path +
                   ": outside a pod the kubernetes backend needs one (set KUBECONFIG, or write ~/.kube/config)");
  return parse_yaml(read_file(path, "the kubeconfig"), "the kubeconfig " + path);
}
}  // namespace

access kubeconfig_access(const std::string& path, const std::string& context) {
  const boost::json::value root = read_kubeconfig(path);
  auto base = std::filesystem::path(path).parent_path();
  auto relative = [&](const std::string& p) { return p.empty() || p[0] == '/' ? p : (base / p).string(); };
  // The `inner` field of the entry of `list` named `name`; nullopt when there is no such entry.
  auto named = [&](const char* list, const std::string& name, const char* inner) -> std::optional<boost::json::value> {
    for (const auto& item : items(root, list))
      if (str(item, "name") == name) return field(item, inner);
    return std::nullopt;
  };
  auto ctx_name = context.empty() ? str(root, "current-context") : context;
  if (ctx_name.empty())
    config_problem("the kubeconfig " + path +
                   " has no current-context: set one (kubectl config use-context NAME) or the config key "
                   "'kubernetes_context'");
  auto found_ctx = named("contexts", ctx_name, "context");
  if (!found_ctx)
    config_problem("the kubeconfig " + path + " has no context '" + ctx_name + "'" +
                   (context.empty() ? "" : " (from the config key 'kubernetes_context')"));
  auto ctx = *found_ctx;
  auto found_cluster = named("clusters", str(ctx, "cluster"), "cluster");
  if (!found_cluster)
    config_problem("the kubeconfig " + path + " has no cluster '" + str(ctx, "cluster") + "' (context " + ctx_name + ")");
  auto cluster = *found_cluster;
  access a;
  a.source = "the kubeconfig " + path + ", context " + ctx_name;
  a.server = str(cluster, "server");
  while (!a.server.empty() && a.server.back() == '/') a.server.pop_back();
  if (a.server.empty()) config_problem("the cluster of context " + ctx_name + " in " + path + " has no server");
  if (auto d = str(cluster, "certificate-authority-data"); !d.empty()) a.ca_pem = base64_decode(d, "certificate-authority-data");
  a.ca_file = relative(str(cluster, "certificate-authority"));
  a.insecure = str(cluster, "insecure-skip-tls-verify") == "true";
  a.namespace_ = str(ctx, "namespace");
  auto user_name = str(ctx, "user");
  auto found_user = named("users", user_name, "user");
  if (!user_name.empty() && !found_user) config_problem("the kubeconfig " + path + " has no user '" + user_name + "'");
  if (found_user) {
    auto user = *found_user;
    if (auto d = str(user, "client-certificate-data"); !d.empty()) a.cert_pem = base64_decode(d, "client-certificate-data");
    if (auto d = str(user, "client-key-data"); !d.empty()) a.key_pem = base64_decode(d, "client-key-data");
    a.cert_file = relative(str(user, "client-certificate"));
    a.key_file = relative(str(user, "client-key"));
    if (auto t = str(user, "token"); !t.empty()) {
      a.tokens = token_source::fixed(t);
    } else if (auto f = str(user, "tokenFile"); !f.empty()) {
      a.tokens = token_source::file(relative(f));
    } else if (const auto& e = field(user, "exec"); e.is_object()) {
      exec_plugin p;
      p.command = str(e, "command");
      if (p.command.empty()) config_problem("the exec plugin of user " + user_name + " in " + path + " names no command");
      if (auto v = str(e, "apiVersion"); !v.empty()) p.api_version = v;
      for (const auto& arg : items(e, "args")) {
        if (!arg.is_string())
          config_problem("the exec plugin of user " + user_name + " in " + path + " has an argument that is not text");
        p.args.emplace_back(arg.get_string());
      }
      for (const auto& kv : items(e, "env")) p.env.emplace_back(str(kv, "name"), str(kv, "value"));
      a.tokens = token_source::exec(std::move(p));
    } else if (user.is_object() && user.as_object().contains("auth-provider")) {
      config_problem("the kubeconfig user " + user_name + " uses an auth-provider, which fiber does not run: use an "
                     "exec credential plugin (client.authentication.k8s.io) or a token");
    }
  }
  return a;
}

access find_access(const fiber::config& cfg) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  std::error_code ec;
  const std::string sa = "/var/run/secrets/kubernetes.io/serviceaccount";
  if (host && *host && cfg.kubernetes_context.empty() && std::filesystem::exists(sa + "/token", ec))
    return in_cluster_access(sa);
  return kubeconfig_access(home_kubeconfig(), cfg.kubernetes_context);
}

}  // namespace fiber::detail::kube
