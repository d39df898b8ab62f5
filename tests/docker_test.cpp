// The Docker Engine API client against a real dockerd (label docker). Without a reachable
// engine these tests skip, except the ones about an unreachable engine.
#include <gtest/gtest.h>
#include <unistd.h>

#include <asio/io_context.hpp>
#include <csignal>

#include "backend/docker/docker_engine.hpp"
#include "docker_support.hpp"
#include "engine_presence.hpp"
#include "support.hpp"
#include "fiber/error.hpp"

using fiber::detail::container_spec;
using fiber::detail::docker_engine;

namespace {
using fiber_test::outcome;
using fiber_test::test_image;
template <class T, class Start>
outcome<T> run(asio::io_context& io, Start start) {
  auto out = fiber_test::run_engine<T>(io, std::move(start));
  if (out.why == "never completed") ADD_FAILURE() << "the operation never completed";
  return out;
}

class docker : public ::testing::Test {
 protected:
  asio::io_context io;
  docker_engine engine{io};
  std::string job = "fiber-test-" + fiber_test::run_id();

  void SetUp() override {
    if (auto why = fiber_test::docker_absent(); !why.empty()) FIBER_TEST_ENGINE_MISSING("Docker", why);
    auto why = fiber_test::prepare_test_image(io, engine);
    ASSERT_TRUE(why.empty()) << why;
  }
  void TearDown() override {
    auto ids = run<std::vector<std::string>>(io, [&](auto done) { engine.containers().list("fiber.job", job, std::move(done)); });
    for (auto& id : ids.value) (void)run<bool>(io, [&](auto done) { engine.containers().remove(id, true, std::move(done)); });
  }
  container_spec spec(std::vector<std::string> cmd) {
    container_spec s;
    s.image = test_image;
    s.cmd = std::move(cmd);
    s.binds = {"/usr:/usr:ro"};
    s.labels = {{"fiber.job", job}, {"fiber.master", std::to_string(getpid())}, {"fiber.process", "test"}};
    s.network_mode = "none";
    return s;
  }
};
}  // namespace

TEST_F(docker, a_container_runs_and_its_exit_code_logs_and_labels_come_back) {
  auto created = run<std::string>(io, [&](auto done) {
    engine.containers().create(spec({"/bin/sh", "-c", "echo hello; echo oops >&2; exit 3"}), std::move(done));
  });
  ASSERT_FALSE(created.ec) << created.why;
  auto id = created.value;
  ASSERT_FALSE(run<bool>(io, [&](auto done) { engine.containers().start(id, std::move(done)); }).ec);
  auto waited = run<int>(io, [&](auto done) { engine.containers().wait(id, std::move(done)); });
  ASSERT_FALSE(waited.ec) << waited.why;
  EXPECT_EQ(waited.value, 3);
  auto logs = run<std::string>(io, [&](auto done) { engine.containers().logs(id, std::move(done)); });
  // Both streams; the engine keeps each stream's order, not the order between the two.
  EXPECT_TRUE(logs.value == "hello\noops\n" || logs.value == "oops\nhello\n") << logs.value;
  auto listed = run<std::vector<std::string>>(io, [&](auto done) { engine.containers().list("fiber.job", job, std::move(done)); });
  EXPECT_EQ(listed.value, std::vector<std::string>{id});
  ASSERT_FALSE(run<bool>(io, [&](auto done) { engine.containers().remove(id, false, std::move(done)); }).ec);
  listed = run<std::vector<std::string>>(io, [&](auto done) { engine.containers().list("fiber.job", job, std::move(done)); });
  EXPECT_TRUE(listed.value.empty());
}

TEST_F(docker, a_killed_container_reports_the_signal) {
  auto created = run<std::string>(io, [&](auto done) { engine.containers().create(spec({"/bin/sleep", "100"}), std::move(done)); });
  ASSERT_FALSE(created.ec) << created.why;
  ASSERT_FALSE(run<bool>(io, [&](auto done) { engine.containers().start(created.value, std::move(done)); }).ec);
  ASSERT_FALSE(run<bool>(io, [&](auto done) { engine.containers().kill(created.value, SIGKILL, std::move(done)); }).ec);
  EXPECT_EQ(run<int>(io, [&](auto done) { engine.containers().wait(created.value, std::move(done)); }).value, 128 + SIGKILL);
}

TEST_F(docker, a_missing_image_is_named_with_what_to_do) {
  auto s = spec({"/bin/true"});
  s.image = "fiber-no-such-image:1";
  auto created = run<std::string>(io, [&](auto done) { engine.containers().create(s, std::move(done)); });
  EXPECT_EQ(created.ec, fiber::errc::spawn_failed);
  EXPECT_NE(created.why.find("image 'fiber-no-such-image:1'"), std::string::npos) << created.why;
  EXPECT_NE(created.why.find("config key 'image'"), std::string::npos) << created.why;
}

TEST_F(docker, api_errors_pass_the_engines_message_on) {
  auto r = run<bool>(io, [&](auto done) { engine.containers().start("no-such-container-id", std::move(done)); });
  EXPECT_EQ(r.ec, fiber::errc::spawn_failed);
  EXPECT_NE(r.why.find("No such container"), std::string::npos) << r.why;
  EXPECT_NE(r.why.find("HTTP 404"), std::string::npos) << r.why;
}

TEST(docker_unreachable, the_error_names_the_socket_tried_and_the_fix) {
  asio::io_context io;
  docker_engine engine(io, "unix:///nonexistent/docker.sock");
  auto v = run<std::string>(io, [&](auto done) { engine.check(std::move(done)); });
  EXPECT_EQ(v.ec, fiber::errc::backend_unavailable);
  EXPECT_NE(v.why.find("unix:///nonexistent/docker.sock"), std::string::npos) << v.why;
  EXPECT_NE(v.why.find("DOCKER_HOST"), std::string::npos) << v.why;
}

TEST(docker_unreachable, a_malformed_docker_host_is_a_config_error) {
  asio::io_context io;
  try {
    docker_engine engine(io, "ftp://x");
    ADD_FAILURE() << "expected config_error";
  } catch (const fiber::error& e) {
    EXPECT_EQ(e.code(), fiber::errc::config_error);
    EXPECT_NE(std::string(e.what()).find("ftp://x"), std::string::npos);
  }
}

// A default bridge made on the engine's first start reports only its subnet (seen on a fresh
// dockerd 20.10); the master then listens on the subnet's first address.
TEST(docker_gateway, a_subnet_without_a_reported_gateway_gives_its_first_address) {
  using fiber::detail::first_host_of;
  EXPECT_EQ(first_host_of("172.17.0.0/16"), "172.17.0.1");
  EXPECT_EQ(first_host_of("10.1.2.128/25"), "10.1.2.129");
  EXPECT_EQ(first_host_of("192.168.7.9/24"), "192.168.7.1");
  EXPECT_EQ(first_host_of("fd00::/64"), "");
  EXPECT_EQ(first_host_of("172.17.0.0"), "");
  EXPECT_EQ(first_host_of("10.0.0.0/32"), "");
}
