#include "cli/registry_auth.hpp"

#include <openssl/evp.h>

#include <boost/json.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "fiber/error.hpp"

namespace fiber::cli {
namespace {

std::string config_path() {
  if (const char* d = std::getenv("DOCKER_CONFIG"); d && *d) return std::string(d) + "/config.json";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/root") + "/.docker/config.json";
}

std::string string_in(const boost::json::object& o, const char* key) {
  auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}

/// `docker-credential-NAME get`, given the registry on stdin, answers {"Username", "Secret"}.
/// `required`: the helper was named for this registry (credHelpers), so a refusal is an error; the
/// general store (credsStore) may simply have nothing for it.
registry_credentials from_helper(const std::string& helper, const std::string& registry, const std::string& file,
                                 bool required) {
  for (char c : helper + registry)
    if (!std::isalnum(static_cast<unsigned char>(c)) && std::string("-_.:/[]").find(c) == std::string::npos)
      throw fiber::error(errc::config_error, "credential helper '" + helper + "' for registry '" + registry + "' in " +
                                                 file + " has characters fiber will not pass to a shell");
  std::string cmd = "printf '%s' '" + registry + "' | docker-credential-" + helper + " get 2>&1";
  std::string out;
  int status = -1;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    status = ::pclose(p);
  }
  boost::system::error_code ec;
  auto v = boost::json::parse(out, ec);
  if ((status != 0 || ec || !v.is_object()) && !required) return {};
  if (status != 0 || ec || !v.is_object())
    throw fiber::error(errc::config_error, "the credential helper docker-credential-" + helper + " (named in " + file +
                                               ") gave no credentials for " + registry + ": " + out +
                                               " — log in with `docker login " + registry + "`, or remove it from " +
                                               file);
  return {string_in(v.as_object(), "Username"), string_in(v.as_object(), "Secret"), "docker-credential-" + helper};
}

}  // namespace

std::string base64_encode(const std::string& data) {
  std::string out(4 * ((data.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(data.data()), static_cast<int>(data.size()));
  out.resize(n < 0 ? 0 : static_cast<std::size_t>(n));
  return out;
}

std::string base64_decode(const std::string& text) {
  if (text.size() % 4 != 0) return {};
  std::string out(text.size() / 4 * 3 + 1, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n < 0) return {};
  out.resize(static_cast<std::size_t>(n));
  // EVP_DecodeBlock counts the padding's bytes as data.
  for (auto i = text.size(); i > 0 && text[i - 1] == '=' && !out.empty(); --i) out.pop_back();
  return out;
}

registry_credentials credentials_for(const std::string& registry) {
  auto file = config_path();
  std::ifstream in(file);
  if (!in) return {};
  std::ostringstream s;
  s << in.rdbuf();
  boost::system::error_code ec;
  auto v = boost::json::parse(s.str(), ec);
  if (ec || !v.is_object())
    throw fiber::error(errc::config_error, file + " is not valid JSON: mend it or point DOCKER_CONFIG elsewhere");
  auto& config = v.as_object();
  if (auto* helpers = config.if_contains("credHelpers"); helpers && helpers->is_object())
    if (auto h = string_in(helpers->as_object(), registry.c_str()); !h.empty()) return from_helper(h, registry, file, true);
  if (auto* auths = config.if_contains("auths"); auths && auths->is_object())
    for (auto& [key, entry] : auths->as_object()) {
      // Keys are "host:port" or a URL ("https://host/v1/").
      std::string host(key);
      if (auto scheme = host.find("://"); scheme != std::string::npos) host = host.substr(scheme + 3);
      host = host.substr(0, host.find('/'));
      if (host != registry || !entry.is_object()) continue;
      auto auth = base64_decode(string_in(entry.as_object(), "auth"));
      if (auto colon = auth.find(':'); colon != std::string::npos)
        return {auth.substr(0, colon), auth.substr(colon + 1), file};
      auto user = string_in(entry.as_object(), "username");
      if (!user.empty()) return {user, string_in(entry.as_object(), "password"), file};
    }
  if (auto store = string_in(config, "credsStore"); !store.empty()) return from_helper(store, registry, file, false);
  return {};
}

std::string registry_auth_header(const registry_credentials& c, const std::string& registry) {
  if (c.username.empty()) return "e30";
  auto json = boost::json::serialize(
      boost::json::object{{"username", c.username}, {"password", c.password}, {"serveraddress", registry}});
  auto b64 = base64_encode(json);
  for (auto& ch : b64) ch = ch == '+' ? '-' : ch == '/' ? '_' : ch;  // base64url, as the engine reads it
  return b64;
}

}  // namespace fiber::cli
