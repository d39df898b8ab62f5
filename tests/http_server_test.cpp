// The HTTP server behind the dashboard, the claim copy service and the recording hand-over
// (transport/http_server), as a stranger on the network would use it: requests refused by their
// head, bodies announced and never sent, floods of connections that say nothing. Each test runs a
// real server on its own loop in a thread and talks to it over real sockets.
#include <gtest/gtest.h>
#include <unistd.h>

#include <asio/connect.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/read.hpp>
#include <asio/read_until.hpp>
#include <asio/write.hpp>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "transport/http_server.hpp"

#include "run_folder.hpp"

namespace fs = std::filesystem;
using fiber::detail::http_reply;
using fiber::detail::http_served_request;
using fiber::detail::http_server;
using fiber::detail::http_server_options;
using asio::ip::tcp;

namespace {

/// A server on a loop of its own, in a thread; it answers 200 with the body's size and its first
/// bytes to requests whose head carries "x-token: right", 403 to any other.
class served {
 public:
  explicit served(http_server_options options) {
    server_ = std::make_unique<http_server>(
        io_, "127.0.0.1", 0, std::move(options),
        [](const http_served_request& r) -> std::optional<http_reply> {
          if (r.header("x-token") == "right") return std::nullopt;
          return http_reply{403, "no token\n"};
        },
        [this](const http_served_request& r) {
          ++handled;
          std::uint64_t sum = 0;
          for (unsigned char c : r.body) sum += c;
          return http_reply{200, std::to_string(r.body.size()) + " " + std::to_string(sum)};
        });
    server_->start();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~served() {
    asio::post(io_, [this] { server_->close(); io_.stop(); });
    thread_.join();
  }
  std::uint16_t port() const { return server_->port(); }
  /// A value read on the server's loop.
  template <class F>
  auto on_loop(F f) {
    std::promise<decltype(f(*server_))> p;
    asio::post(io_, [&] { p.set_value(f(*server_)); });
    return p.get_future().get();
  }
  std::atomic<int> handled{0};

 private:
  asio::io_context io_;
  std::unique_ptr<http_server> server_;
  std::thread thread_;
};

/// A client's blocking socket.
struct client {
  asio::io_context io;
  tcp::socket s{io};
  explicit client(std::uint16_t port) { s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port)); }
  void send(std::string_view text) { asio::write(s, asio::buffer(text)); }
  /// Everything until the server closes (a reset counts as its close).
  std::string rest() {
    std::string out;
    std::error_code ec;
    asio::read(s, asio::dynamic_buffer(out), ec);
    return out;
  }
};

/// A field of /proc/self/status, in kB.
long status_kb(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  return -1;
}

}  // namespace

TEST(http_server, a_request_refused_by_its_head_is_answered_without_its_body_being_read_or_room_made) {
  http_server_options options;
  options.max_body = std::uint64_t{4} << 30;
  served server(options);
  auto before = status_kb("VmHWM");
  // Two strangers announce a gigabyte each and send none of it: each is refused at once (the
  // answer could not come if the server waited for the body), and no room is made for either.
  for (int i = 0; i < 2; ++i) {
    client c(server.port());
    c.send("PUT /tree?path=x HTTP/1.1\r\nHost: h\r\nContent-Length: 1073741824\r\n\r\n");
    auto answer = c.rest();
    EXPECT_EQ(answer.rfind("HTTP/1.1 403", 0), 0u) << answer;
  }
  EXPECT_LT(status_kb("VmHWM") - before, 64 * 1024) << "the server's peak memory grew";
  EXPECT_EQ(server.handled, 0);
}

TEST(http_server, an_admitted_body_is_stored_in_a_file_as_it_arrives_not_held_in_memory) {
  auto folder = fiber_test::run_folder() / ("http_server_bodies_" + std::to_string(::getpid()));
  fs::create_directories(folder);
  http_server_options options;
  options.max_body = std::uint64_t{1} << 30;
  options.body_folder = folder;
  served server(options);
  constexpr std::size_t size = 192u << 20;
  std::string piece(1 << 20, '\x03');
  auto anon_before = status_kb("RssAnon");
  client c(server.port());
  c.send("PUT /tree?path=x HTTP/1.1\r\nHost: h\r\nx-token: right\r\nContent-Length: " + std::to_string(size) + "\r\n\r\n");
  for (std::size_t sent = 0; sent < size; sent += piece.size()) c.send(piece);
  auto answer = c.rest();
  EXPECT_NE(answer.find("\r\n\r\n" + std::to_string(size) + " " + std::to_string(std::uint64_t{3} * size)), std::string::npos)
      << answer.substr(0, 200);
  EXPECT_LT(status_kb("RssAnon") - anon_before, 64 * 1024) << "the body was held in memory";
  // Unnamed: nothing is left in the folder.
  EXPECT_TRUE(fs::is_empty(folder));
  fs::remove_all(folder);
}

TEST(http_server, a_chunked_body_is_taken_whole_and_a_bad_chunk_end_is_refused) {
  http_server_options options;
  options.max_body = 1000;
  served server(options);
  {
    client c(server.port());
    c.send("PUT / HTTP/1.1\r\nx-token: right\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
    auto answer = c.rest();
    EXPECT_NE(answer.find("\r\n\r\n5 " + std::to_string('a' + 'b' + 'c' + 'd' + 'e')), std::string::npos) << answer;
  }
  client c(server.port());
  c.send("PUT / HTTP/1.1\r\nx-token: right\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXY0\r\n\r\n");
  auto answer = c.rest();
  EXPECT_EQ(answer.rfind("HTTP/1.1 400", 0), 0u) << answer;
  EXPECT_NE(answer.find("chunk"), std::string::npos) << answer;
}

TEST(http_server, a_flood_of_silent_connections_holds_at_most_max_unchecked_and_clients_are_served_after) {
  http_server_options options;
  options.max_unchecked = 8;
  options.head_timeout = std::chrono::seconds(600);  // only the cap is at work here
  served server(options);
  std::vector<std::unique_ptr<client>> flood;
  for (int i = 0; i < 50; ++i) flood.push_back(std::make_unique<client>(server.port()));
  // Accepted in the order they connected: the first eight wait for their head, the rest are
  // closed unread at once.
  for (int i = 8; i < 50; ++i) EXPECT_EQ(flood[static_cast<std::size_t>(i)]->rest(), "") << i;
  EXPECT_EQ(server.on_loop([](http_server& s) { return s.unchecked(); }), 8u);
  EXPECT_EQ(server.on_loop([](http_server& s) { return s.turned_away(); }), 42u);
  // The waiting ones go; a client is served again once the server has seen them go.
  flood.clear();
  std::string answer;
  for (int attempt = 0; attempt < 1000 && answer.empty(); ++attempt) {
    client c(server.port());
    c.send("GET / HTTP/1.1\r\nx-token: right\r\n\r\n");
    answer = c.rest();
  }
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;
}

// A refused request's connection lingers (what its client still sends is read and dropped) until
// the client closes it, and it counts against the cap while it does: refusing a stranger does not
// let it out of max_unchecked.
TEST(http_server, a_refused_request_still_counts_against_the_cap_until_it_closes) {
  http_server_options options;
  options.max_unchecked = 2;
  options.head_timeout = std::chrono::seconds(600);
  served server(options);
  client a(server.port()), b(server.port());
  for (auto* c : {&a, &b}) {
    c->send("GET / HTTP/1.1\r\nx-token: wrong\r\n\r\n");
    std::string head;
    asio::read_until(c->s, asio::dynamic_buffer(head), "\r\n\r\n");
    EXPECT_EQ(head.rfind("HTTP/1.1 403", 0), 0u) << head;
  }
  client third(server.port());
  EXPECT_EQ(third.rest(), "") << "a third stranger is turned away while two refused ones linger";
  EXPECT_EQ(server.on_loop([](http_server& s) { return s.unchecked(); }), 2u);
}

TEST(http_server, a_client_that_does_not_finish_its_head_in_time_is_dropped) {
  http_server_options options;
  options.head_timeout = std::chrono::seconds(1);
  options.client_timeout = std::chrono::seconds(600);
  served server(options);
  client slow(server.port());
  slow.send("GET / HT");  // and no more: the server closes it at its head deadline
  EXPECT_EQ(slow.rest(), "");
  EXPECT_EQ(server.handled, 0);
}
