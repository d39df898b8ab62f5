// The HTTP client (libcurl multi on Asio) against an HTTP/1.1 server run inside the test, on
// TCP and on a unix socket: JSON, errors, slow and streamed answers, dropped connections.
#include <gtest/gtest.h>
#include <unistd.h>

#include <asio/experimental/as_tuple.hpp>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/local/stream_protocol.hpp>
#include <asio/read.hpp>
#include <asio/read_until.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>
#include <boost/json.hpp>
#include <filesystem>

#include "fiber/error.hpp"
#include "backend/docker/docker_engine.hpp"
#include "transport/http_client.hpp"

#include "run_folder.hpp"

using fiber::detail::http_client;
using fiber::detail::http_request;
using fiber::detail::http_response;

namespace {
struct test_server {
  asio::io_context& io;
  asio::ip::tcp::acceptor tcp{io, {asio::ip::make_address("127.0.0.1"), 0}};
  std::string socket_path;
  asio::local::stream_protocol::acceptor local{io};
  asio::steady_timer release{io, std::chrono::hours(1)};  // /stream goes on when this is cancelled
  asio::steady_timer forever{io, std::chrono::hours(1)};  // /slow never answers

  explicit test_server(asio::io_context& io_) : io(io_) {
    socket_path = (fiber_test::run_folder() / ("fiber-http-" + std::to_string(getpid()) + ".sock")).string();
    std::filesystem::remove(socket_path);
    local.open();
    local.bind(asio::local::stream_protocol::endpoint(socket_path));
    local.listen();
  }
  ~test_server() { std::filesystem::remove(socket_path); }
  std::string base() const { return "http://127.0.0.1:" + std::to_string(tcp.local_endpoint().port()); }
  void stop() {
    tcp.close();
    local.close();
    release.cancel();
    forever.cancel();
  }
};

std::string response(int status, const std::string& body, const std::string& type = "application/json") {
  return "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: " + type + "\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}
std::string chunk(const std::string& s) {
  char size[16];
  std::snprintf(size, sizeof size, "%zx", s.size());
  return std::string(size) + "\r\n" + s + "\r\n";
}

template <class Socket>
asio::awaitable<void> serve(Socket s, test_server* srv) {
  std::string buf;
  auto n = co_await asio::async_read_until(s, asio::dynamic_buffer(buf), "\r\n\r\n", asio::use_awaitable);
  std::string head = buf.substr(0, n);
  std::string method = head.substr(0, head.find(' '));
  auto path_start = head.find(' ') + 1;
  std::string path = head.substr(path_start, head.find(' ', path_start) - path_start);
  std::size_t length = 0;
  if (auto at = head.find("Content-Length: "); at != std::string::npos) length = std::stoul(head.substr(at + 16));
  if (buf.size() - n < length)
    co_await asio::async_read(s, asio::dynamic_buffer(buf), asio::transfer_exactly(length - (buf.size() - n)),
                              asio::use_awaitable);
  std::string body = buf.substr(n, length);

  std::string out;
  if (path.starts_with("/json")) {
    boost::json::object o{{"method", method}, {"path", path}, {"body", body}};
    out = response(200, boost::json::serialize(o));
  } else if (path == "/version") {  // a double of an old Docker engine's GET /version
    out = response(200, R"({"Version":"19.03.0","ApiVersion":"1.40"})");
  } else if (path == "/missing") {
    out = response(404, R"({"message":"No such container: abc"})");
  } else if (path == "/malformed") {
    out = response(200, "{not json");
  } else if (path == "/drop") {
    out = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789";
  } else if (path == "/slow") {
    auto [ec] = co_await srv->forever.async_wait(asio::experimental::as_tuple(asio::use_awaitable));
    out = response(200, "{}");
  } else if (path == "/stream") {
    std::string first = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + chunk("one\n");
    co_await asio::async_write(s, asio::buffer(first), asio::use_awaitable);
    auto [ec] = co_await srv->release.async_wait(asio::experimental::as_tuple(asio::use_awaitable));
    out = chunk("two\n") + chunk("three\n") + "0\r\n\r\n";
  }
  co_await asio::async_write(s, asio::buffer(out), asio::use_awaitable);
  std::error_code ignored;
  s.shutdown(Socket::shutdown_both, ignored);
}

template <class Acceptor>
asio::awaitable<void> accept_loop(Acceptor& acceptor, test_server* srv) {
  for (;;) {
    auto [ec, s] = co_await acceptor.async_accept(asio::experimental::as_tuple(asio::use_awaitable));
    if (ec) co_return;
    asio::co_spawn(acceptor.get_executor(), serve(std::move(s), srv), asio::detached);
  }
}

class http : public ::testing::Test {
 protected:
  asio::io_context io;
  test_server srv{io};
  http_client client{io};

  void SetUp() override {
    asio::co_spawn(io, accept_loop(srv.tcp, &srv), asio::detached);
    asio::co_spawn(io, accept_loop(srv.local, &srv), asio::detached);
  }

  /// Runs one request to completion on the test's io_context.
  std::pair<std::error_code, http_response> run(http_request req, http_client::chunk_fn on_chunk = nullptr) {
    std::optional<std::pair<std::error_code, http_response>> result;
    client.start(std::move(req), [&](std::error_code ec, http_response r) {
      result.emplace(ec, std::move(r));
      srv.stop();
    }, std::move(on_chunk));
    io.run();
    EXPECT_TRUE(result) << "the request never completed";
    return result ? std::move(*result) : std::pair<std::error_code, http_response>{};
  }
};
}  // namespace

TEST_F(http, json_over_tcp) {
  auto [ec, r] = run({.url = srv.base() + "/json?x=1"});
  ASSERT_FALSE(ec) << ec.message() << " " << r.body;
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("Content-Type"), "application/json");
  EXPECT_EQ(r.json().at("path").as_string(), "/json?x=1");
}

TEST_F(http, json_over_a_unix_socket) {
  auto [ec, r] = run({.url = "http://localhost/json/unix", .unix_socket = srv.socket_path});
  ASSERT_FALSE(ec) << ec.message() << " " << r.body;
  EXPECT_EQ(r.json().at("path").as_string(), "/json/unix");
}

TEST_F(http, post_sends_its_body_and_method) {
  auto [ec, r] = run({.method = "POST", .url = srv.base() + "/json", .body = R"({"Image":"x"})"});
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(r.json().at("method").as_string(), "POST");
  EXPECT_EQ(r.json().at("body").as_string(), R"({"Image":"x"})");
}

TEST_F(http, delete_without_a_body) {
  auto [ec, r] = run({.method = "DELETE", .url = srv.base() + "/json/c1"});
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(r.json().at("method").as_string(), "DELETE");
  EXPECT_EQ(r.json().at("body").as_string(), "");
}

TEST_F(http, non_2xx_keeps_the_status_and_the_error_body) {
  auto [ec, r] = run({.url = srv.base() + "/missing"});
  ASSERT_FALSE(ec);
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.json().at("message").as_string(), "No such container: abc");
}

TEST_F(http, malformed_json_is_a_clear_error) {
  auto url = srv.base() + "/malformed";
  auto [ec, r] = run({.url = url});
  ASSERT_FALSE(ec);
  try {
    (void)r.json();
    ADD_FAILURE() << "expected malformed_message";
  } catch (const fiber::error& e) {
    EXPECT_EQ(e.code(), fiber::errc::malformed_message);
    EXPECT_NE(std::string(e.what()).find("GET " + url), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("{not json"), std::string::npos) << e.what();
  }
}

TEST_F(http, a_slow_answer_times_out) {
  auto [ec, r] = run({.url = srv.base() + "/slow", .timeout = std::chrono::milliseconds(100)});
  EXPECT_EQ(ec, fiber::errc::timeout) << ec.message();
  EXPECT_NE(r.body.find("timed out"), std::string::npos) << r.body;
}

TEST_F(http, a_connection_dropped_mid_body_is_an_error) {
  auto [ec, r] = run({.url = srv.base() + "/drop"});
  EXPECT_EQ(ec.category(), fiber::detail::curl_category());
  EXPECT_EQ(ec.value(), 18) << ec.message();  // CURLE_PARTIAL_FILE
}

TEST_F(http, an_unreachable_socket_names_the_problem) {
  auto [ec, r] = run({.url = "http://localhost/_ping", .unix_socket = "/nonexistent/docker.sock"});
  EXPECT_EQ(ec.category(), fiber::detail::curl_category());
  EXPECT_FALSE(r.body.empty());
}

TEST_F(http, a_streamed_answer_arrives_as_it_comes) {
  std::vector<std::string> chunks;
  auto [ec, r] = run({.url = srv.base() + "/stream", .timeout = std::chrono::seconds(20)}, [&](std::string_view c) {
    chunks.emplace_back(c);
    // The server sends the rest only after the first chunk got here.
    if (chunks.size() == 1) srv.release.cancel();
  });
  ASSERT_FALSE(ec) << ec.message() << " " << r.body;
  std::string all;
  for (auto& c : chunks) all += c;
  EXPECT_EQ(all, "one\ntwo\nthree\n");
  EXPECT_EQ(chunks.front(), "one\n");
  EXPECT_TRUE(r.body.empty());
}

TEST_F(http, a_request_started_from_a_body_callback_goes_out) {
  // A watch event that makes its reader send a request (a pod ended: delete it) runs inside
  // curl, where libcurl refuses to add a transfer: the client adds it from the loop instead.
  std::optional<std::error_code> inner;
  std::string inner_body;
  auto [ec, r] = run({.url = srv.base() + "/stream", .timeout = std::chrono::seconds(20)}, [&](std::string_view) {
    if (inner) return;
    inner = std::error_code(-1, std::generic_category());  // started, not answered yet
    client.start({.url = srv.base() + "/json"}, [&](std::error_code e, http_response answer) {
      inner = e;
      inner_body = answer.body;
      srv.release.cancel();  // the stream goes on once the inner request is answered
    });
  });
  ASSERT_FALSE(ec) << ec.message() << " " << r.body;
  ASSERT_TRUE(inner);
  EXPECT_FALSE(*inner) << inner->message() << ": " << inner_body;
  EXPECT_NE(inner_body.find("\"/json\""), std::string::npos) << inner_body;
}

TEST_F(http, cancellation_completes_the_request_with_operation_aborted) {
  asio::cancellation_signal cancel;
  std::optional<std::error_code> result;
  client.async_request({.url = srv.base() + "/slow"},
                       asio::bind_cancellation_slot(cancel.slot(), [&](std::error_code ec, http_response) {
                         result = ec;
                         srv.stop();
                       }));
  asio::post(io, [&] { cancel.emit(asio::cancellation_type::terminal); });
  io.run();
  ASSERT_TRUE(result);
  EXPECT_EQ(*result, asio::error::operation_aborted);
  EXPECT_EQ(client.in_flight(), 0u);
}

TEST_F(http, many_requests_in_parallel_on_one_io_context) {
  constexpr int n = 100;
  int completed = 0, good = 0;
  for (int i = 0; i < n; ++i) {
    http_request req{.url = srv.base() + "/json/" + std::to_string(i)};
    if (i % 2) req = {.url = "http://localhost/json/" + std::to_string(i), .unix_socket = srv.socket_path};
    client.start(std::move(req), [&, i](std::error_code ec, http_response r) {
      if (!ec && r.json().at("path").as_string() == "/json/" + std::to_string(i)) ++good;
      if (++completed == n) srv.stop();
    });
  }
  io.run();
  EXPECT_EQ(completed, n);
  EXPECT_EQ(good, n);
  EXPECT_EQ(client.in_flight(), 0u);
}

TEST_F(http, a_client_whose_last_owner_is_its_own_request_goes_cleanly_and_the_loop_goes_on) {
  // A backend's engine owns its client, and its requests' handlers hold the engine: the last of
  // them to go destroys the client from inside the client's own completion.
  auto owner = std::make_shared<http_client>(io);
  std::optional<std::error_code> first;
  std::optional<std::pair<std::error_code, std::string>> after;
  owner->start({.url = srv.base() + "/json/owned"}, [&, keep = owner](std::error_code ec, http_response) {
    first = ec;
    client.start({.url = srv.base() + "/json/after"}, [&](std::error_code e, http_response r) {
      after.emplace(e, r.body);
      srv.stop();
    });
  });
  owner.reset();
  io.run();
  ASSERT_TRUE(first) << "the owned request never completed";
  EXPECT_FALSE(*first) << first->message();
  ASSERT_TRUE(after) << "the loop stopped serving requests after the client went";
  EXPECT_FALSE(after->first) << after->first.message();
  EXPECT_NE(after->second.find("/json/after"), std::string::npos) << after->second;
}

namespace {
asio::awaitable<void> awaited(http_client& client, std::string url, std::string& out, test_server& srv) {
  http_request req;  // a named request: g++ 12 miscompiles an aggregate temporary inside co_await
  req.url = url;
  auto [ec, r] = co_await client.async_request(std::move(req), asio::experimental::as_tuple(asio::use_awaitable));
  out = ec ? ec.message() : std::string(r.json().at("path").as_string());
  srv.stop();
}
}  // namespace

TEST_F(http, awaitable) {
  std::string out;
  asio::co_spawn(io, awaited(client, srv.base() + "/json/awaited", out, srv), asio::detached);
  io.run();
  EXPECT_EQ(out, "/json/awaited");
}

// Against a double of the engine's /version (no old dockerd can run here): an engine older than
// API 1.41 is refused with what to do.
TEST_F(http, docker_engine_double_with_too_old_an_api_is_refused_with_the_fix) {
  fiber::detail::docker_engine engine(io, "tcp://127.0.0.1:" + std::to_string(srv.tcp.local_endpoint().port()));
  std::optional<std::pair<std::error_code, std::string>> result;
  engine.check([&](std::error_code ec, std::string, std::string why) {
    result.emplace(ec, why);
    srv.stop();
  });
  io.run();
  ASSERT_TRUE(result);
  EXPECT_EQ(result->first, fiber::errc::backend_unavailable);
  EXPECT_NE(result->second.find("speaks API 1.40"), std::string::npos) << result->second;
  EXPECT_NE(result->second.find("1.41 or newer"), std::string::npos) << result->second;
  EXPECT_NE(result->second.find("upgrade Docker"), std::string::npos) << result->second;
}
