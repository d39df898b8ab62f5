// `fiber dashboard`'s relay (cli/dashboard_relay) as an attacker who holds the page's token would
// use it: the relay sends requests on with the user's own credentials (on Kubernetes, to the API
// server's pod proxy), so a target that climbs out of the page ("/../../api/v1/.../secrets") must
// never reach the upstream server. Here the upstream is a real HTTP server on this host that
// records every target it is asked for, in the place of the API server.
#include <gtest/gtest.h>

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/read.hpp>
#include <asio/write.hpp>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cli/dashboard_relay.hpp"
#include "transport/http_client.hpp"
#include "transport/http_server.hpp"

using asio::ip::tcp;
namespace {

const std::string token = "0123456789abcdef0123456789abcdef";

class relay_to_recorder : public ::testing::Test {
 protected:
  void SetUp() override {
    upstream_ = std::make_unique<fiber::detail::http_server>(
        io_, "127.0.0.1", 0, fiber::detail::http_server_options{}, nullptr,
        [this](const fiber::detail::http_served_request& r) {
          std::lock_guard lock(mutex_);
          asked_.push_back(r.target);
          return fiber::detail::http_reply{200, "upstream answered " + r.target};
        });
    upstream_->start();
    auto prefix = "http://127.0.0.1:" + std::to_string(upstream_->port()) + "/api/v1/namespaces/ns/pods/master:8080/proxy";
    relay_ = std::make_unique<fiber::cli::dashboard_relay>(
        io_, fiber::cli::printed_dashboard{8080, token},
        [prefix](fiber::detail::http_request& req, const std::string& target) { req.url = prefix + target; }, 0);
    relay_->start();
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    std::promise<void> closed;
    asio::post(io_, [&] {
      relay_->close();
      upstream_->close();
      io_.stop();
      closed.set_value();
    });
    closed.get_future().get();
    thread_.join();
    relay_.reset();
    upstream_.reset();
  }

  /// The relay's whole answer to a raw request line for `target`.
  std::string get(const std::string& target) {
    asio::io_context io;
    tcp::socket s(io);
    s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), relay_->port()));
    asio::write(s, asio::buffer("GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    std::string out;
    std::error_code ec;
    asio::read(s, asio::dynamic_buffer(out), ec);
    return out;
  }
  std::vector<std::string> asked() {
    std::lock_guard lock(mutex_);
    return asked_;
  }

  asio::io_context io_;
  std::unique_ptr<fiber::detail::http_server> upstream_;
  std::unique_ptr<fiber::cli::dashboard_relay> relay_;
  std::thread thread_;
  std::mutex mutex_;
  std::vector<std::string> asked_;
};

}  // namespace

TEST(dashboard_relay_target, only_the_pages_own_paths_are_asked_for_and_the_target_is_built_here) {
  EXPECT_EQ(fiber::cli::dashboard_upstream_target("/", token), "/?token=" + token);
  EXPECT_EQ(fiber::cli::dashboard_upstream_target("/state", token), "/state?token=" + token);
  EXPECT_EQ(fiber::cli::dashboard_upstream_target("/events", token), "/events?token=" + token);
  for (auto bad : {"/../../../../api/v1/namespaces/ns/secrets", "/state/../../secrets", "//state", "/%2e%2e/secrets",
                   "/State", "", "state"})
    EXPECT_EQ(fiber::cli::dashboard_upstream_target(bad, token), std::nullopt) << bad;
}

TEST_F(relay_to_recorder, a_target_that_climbs_out_of_the_page_never_reaches_the_upstream_server) {
  for (auto target : {"/../../../../api/v1/namespaces/ns/secrets?token=" + token,
                      "/%2e%2e/%2e%2e/%2e%2e/%2e%2e/api/v1/namespaces/ns/secrets?token=" + token,
                      "/state/../../../secrets?token=" + token}) {
    auto answer = get(target);
    EXPECT_EQ(answer.rfind("HTTP/1.1 404", 0), 0u) << target << "\n" << answer;
    EXPECT_NE(answer.find("serves only the run's page"), std::string::npos) << answer;
  }
  // Without the token nothing goes on either, whatever the path.
  EXPECT_EQ(get("/state").rfind("HTTP/1.1 403", 0), 0u);
  EXPECT_TRUE(asked().empty()) << asked().front();
}

TEST_F(relay_to_recorder, the_pages_paths_go_on_with_a_target_the_relay_built_whatever_the_query_held) {
  auto answer = get("/state?token=" + token + "&extra=/../../secrets");
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;
  EXPECT_NE(answer.find("upstream answered /api/v1/namespaces/ns/pods/master:8080/proxy/state?token=" + token),
            std::string::npos)
      << answer;
  ASSERT_EQ(asked().size(), 1u);
  EXPECT_EQ(asked()[0], "/api/v1/namespaces/ns/pods/master:8080/proxy/state?token=" + token);
}

TEST(http_client_path, a_path_goes_as_built_dot_segments_included) {
  // The client does not fold "/../": what it was told to ask for is what the server sees.
  asio::io_context io;
  std::string seen;
  fiber::detail::http_server server(io, "127.0.0.1", 0, fiber::detail::http_server_options{}, nullptr,
                                    [&](const fiber::detail::http_served_request& r) {
                                      seen = r.target;
                                      return fiber::detail::http_reply{200, "ok"};
                                    });
  server.start();
  fiber::detail::http_client http(io);
  fiber::detail::http_request req;
  req.url = "http://127.0.0.1:" + std::to_string(server.port()) + "/proxy/../secrets";
  bool done = false;
  http.start(std::move(req), [&](std::error_code ec, fiber::detail::http_response) {
    EXPECT_FALSE(ec) << ec.message();
    done = true;
    server.close();
  });
  while (!done && io.run_one()) {
  }
  EXPECT_EQ(seen, "/proxy/../secrets");
}
