// DOCKER_HOST as Docker's own client reads it (backend/docker/docker_engine): TLS with
// DOCKER_CERT_PATH's certificates when DOCKER_TLS_VERIFY is set, and no secret sent to an engine
// reached over plain TCP from another host (nothing is sent to those addresses here: the refusals
// come before any request).
#include "backend/docker/docker_engine.hpp"

#include <asio/io_context.hpp>
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "fiber/error.hpp"
#include "support.hpp"

namespace {
using fiber::detail::docker_engine;

/// Sets the Docker variables for a test and puts them back.
struct docker_env {
  docker_env(const char* tls_verify, const char* cert_path) {
    set("DOCKER_TLS_VERIFY", tls_verify);
    set("DOCKER_CERT_PATH", cert_path);
  }
  ~docker_env() {
    for (auto& [name, value] : saved)
      if (value) ::setenv(name.c_str(), value->c_str(), 1);
      else ::unsetenv(name.c_str());
  }
  void set(const std::string& name, const char* value) {
    const char* old = std::getenv(name.c_str());
    saved.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    if (value) ::setenv(name.c_str(), value, 1);
    else ::unsetenv(name.c_str());
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
};
}  // namespace

TEST(docker_engine, tls_verify_speaks_https_with_the_cert_paths_certificates) {
  docker_env env("1", "/certs/of/this/user");
  asio::io_context io;
  docker_engine e(io, "tcp://10.1.2.3:2376");
  auto r = e.request("GET", "/version");
  EXPECT_EQ(r.url, "https://10.1.2.3:2376/version");
  EXPECT_EQ(r.ca_file, "/certs/of/this/user/ca.pem");
  EXPECT_EQ(r.cert_file, "/certs/of/this/user/cert.pem");
  EXPECT_EQ(r.key_file, "/certs/of/this/user/key.pem");
  EXPECT_TRUE(r.verify_tls);
  EXPECT_FALSE(e.plain_over_network());
}

TEST(docker_engine, tls_verify_without_a_place_for_the_certificates_is_a_config_error) {
  docker_env env("1", nullptr);
  env.set("HOME", nullptr);
  asio::io_context io;
  fiber_test::expect_error([&] { docker_engine e(io, "tcp://10.1.2.3:2376"); }, fiber::errc::config_error,
                           "DOCKER_CERT_PATH");
}

TEST(docker_engine, plain_tcp_to_another_host_gets_no_registry_credentials) {
  docker_env env(nullptr, nullptr);
  asio::io_context io;
  docker_engine e(io, "tcp://10.1.2.3:2375");
  EXPECT_EQ(e.request("GET", "/version").url, "http://10.1.2.3:2375/version");
  EXPECT_TRUE(e.plain_over_network());
  std::optional<std::string> why;
  e.images().push("registry.example/team/app", "v1", "eyJ1c2VybmFtZSI6InUiLCJwYXNzd29yZCI6InAifQ", [](std::string_view) {},
         [&](std::error_code ec, std::string, std::string w) {
           EXPECT_EQ(ec, fiber::errc::config_error);
           why = w;
         });
  ASSERT_TRUE(why) << "the push was sent";
  EXPECT_NE(why->find("plain TCP"), std::string::npos) << *why;
  EXPECT_NE(why->find("DOCKER_TLS_VERIFY"), std::string::npos) << *why;
}

TEST(docker_engine, plain_tcp_on_this_host_or_a_unix_socket_is_not_over_a_network) {
  docker_env env(nullptr, nullptr);
  asio::io_context io;
  EXPECT_FALSE(docker_engine(io, "tcp://127.0.0.1:2375").plain_over_network());
  EXPECT_FALSE(docker_engine(io, "tcp://localhost:2375").plain_over_network());
  EXPECT_FALSE(docker_engine(io, "unix:///var/run/docker.sock").plain_over_network());
}
