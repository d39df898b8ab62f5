// Direct links across a network: TLS 1.3 with the job's key over TCP (transport/tls_session,
// runtime/links/direct_listener's listen_tcp and direct_connect's connect_tls_link), the master closing a child's link that
// has gone silent, and the child's pulse (runtime/links/link_pulse) that keeps a busy child heard and
// ends it when its master hangs up.
#include <gtest/gtest.h>

#include <asio/io_context.hpp>
#include <future>
#include <thread>

#include "fiber/error.hpp"
#include "runtime/links/direct_listener.hpp"
#include "runtime/links/direct_connect.hpp"
#include "runtime/links/link_pulse.hpp"
#include "runtime/protocol.hpp"
#include "transport/tls_session.hpp"
#include "tls_handshake.hpp"

using namespace fiber::detail;
using namespace std::chrono_literals;

namespace {
const auto job_key = tls_session::key_for("the job's secret");
const auto other_key = tls_session::key_for("another job's secret");

multipart message_of(std::initializer_list<std::string> parts) {
  multipart m;
  for (auto& p : parts) m.emplace_back(p.data(), p.size());
  return m;
}

/// A master's listener on 127.0.0.1 that expects children "7" and "8".
struct master {
  asio::io_context io;
  std::shared_ptr<direct_listener> listener;
  std::string address;  // tls://127.0.0.1:<port>
  std::vector<std::pair<std::string, multipart>> received;

  explicit master(std::chrono::milliseconds silence = 10s, std::chrono::milliseconds greeting = 10s) {
    listener = std::make_shared<direct_listener>(
        io, "the password", 1 << 30, greeting, [](const std::string& id) { return id == "7" || id == "8"; },
        [this](const std::string& id, multipart&& m) { received.emplace_back(id, std::move(m)); });
    auto bound = listener->listen_tcp("127.0.0.1", job_key, 20ms, silence);
    address = "tls://" + bound.substr(6);
  }
  /// Runs until `done`, at most `limit` (against a hang, not as a measurement).
  template <class F>
  bool run_until(F done, std::chrono::seconds limit = 60s) {
    auto end = std::chrono::steady_clock::now() + limit;
    while (!done() && std::chrono::steady_clock::now() < end) io.run_one_for(100ms);
    return done();
  }
};

/// Connects a child on a thread of its own while the master's loop runs.
std::shared_ptr<stream_link> connect_child(master& m, asio::io_context& child_io, const std::string& id,
                                           const tls_session::key& key) {
  auto f = std::async(std::launch::async, [&] { return connect_tls_link(child_io, m.address, id, key, 10s, 10s); });
  m.run_until([&] { return f.wait_for(0s) == std::future_status::ready; });
  return f.get();
}
}  // namespace

TEST(tls_session, the_same_key_makes_a_session_and_the_bytes_go_both_ways) {
  tls_session client(tls_session::role::client, job_key), server(tls_session::role::server, job_key);
  ASSERT_TRUE(handshake_pair(client, server)) << client.failure() << server.failure();
  client.seal("hello", 5);
  std::string wire;
  client.take_output(wire);
  EXPECT_EQ(wire.find("hello"), std::string::npos) << "the bytes travel encrypted";
  server.feed(wire.data(), wire.size());
  char out[16] = {};
  ASSERT_EQ(server.open(out, sizeof out), 5);
  EXPECT_EQ(std::string(out, 5), "hello");
  EXPECT_EQ(server.open(out, sizeof out), 0) << "nothing more came";
}

TEST(tls_session, a_message_of_many_records_arrives_whole_after_what_was_already_taken) {
  tls_session client(tls_session::role::client, job_key), server(tls_session::role::server, job_key);
  ASSERT_TRUE(handshake_pair(client, server));
  std::string first = "a header", large(3 * 16384 + 5, '\0');
  for (std::size_t i = 0; i < large.size(); ++i) large[i] = static_cast<char>(i * 7 + i / 251);
  std::string wire = "kept";  // what the caller already held stays in front
  client.seal(first.data(), first.size());
  client.take_output(wire);
  EXPECT_FALSE(client.has_output());
  client.reserve_output(large.size() + 1024);
  client.seal(large.data(), large.size());
  EXPECT_TRUE(client.has_output());
  client.take_output(wire);
  EXPECT_FALSE(client.has_output()) << "taken output is not sent twice";
  ASSERT_EQ(wire.substr(0, 4), "kept");
  EXPECT_GT(wire.size(), 4 + first.size() + large.size()) << "records carry a header and a tag each";
  server.feed(wire.data() + 4, wire.size() - 4);
  std::string got(first.size() + large.size() + 16, '\0');
  std::size_t at = 0;
  for (long n; (n = server.open(got.data() + at, got.size() - at)) > 0;) at += static_cast<std::size_t>(n);
  got.resize(at);
  EXPECT_EQ(got, first + large);
}

TEST(tls_session, another_key_makes_no_session) {
  tls_session client(tls_session::role::client, other_key), server(tls_session::role::server, job_key);
  EXPECT_FALSE(handshake_pair(client, server));
  EXPECT_FALSE(client.established() && server.established());
}

TEST(tls_session, altered_bytes_do_not_decrypt) {
  tls_session client(tls_session::role::client, job_key), server(tls_session::role::server, job_key);
  ASSERT_TRUE(handshake_pair(client, server));
  client.seal("a task", 6);
  std::string wire;
  client.take_output(wire);
  wire[wire.size() - 3] ^= 1;
  server.feed(wire.data(), wire.size());
  char out[16];
  EXPECT_EQ(server.open(out, sizeof out), -1);
  EXPECT_FALSE(server.failure().empty());
}

TEST(tls_link, a_child_with_the_key_is_linked_and_messages_arrive_whole_both_ways) {
  master m;
  asio::io_context child_io;
  auto link = connect_child(m, child_io, "7", job_key);
  std::vector<multipart> child_got;
  link->start([&](multipart msg) { child_got.push_back(std::move(msg)); }, [](std::error_code) {});
  std::string large(3 << 20, 'x');  // past the read buffer: read straight into its part
  for (std::size_t i = 0; i < large.size(); i += 4096) large[i] = static_cast<char>('a' + i / 4096 % 26);
  ASSERT_FALSE(link->send(message_of({"first", ""})));
  ASSERT_FALSE(link->send(message_of({"big", large, "tail"})));
  ASSERT_FALSE(link->send(message_of({"last"})));
  // The child's loop writes what the socket did not take at once.
  std::jthread child([&](std::stop_token st) {
    while (!st.stop_requested()) child_io.run_one_for(20ms);
  });
  ASSERT_TRUE(m.run_until([&] { return m.received.size() == 3; }));
  EXPECT_EQ(m.received[0].first, "7");
  EXPECT_EQ(m.received[0].second[0].to_string(), "first");
  EXPECT_EQ(m.received[0].second[1].size(), 0u);
  ASSERT_EQ(m.received[1].second.size(), 3u);
  EXPECT_EQ(m.received[1].second[1].to_string(), large);
  EXPECT_EQ(m.received[1].second[2].to_string(), "tail");
  EXPECT_EQ(m.received[2].second[0].to_string(), "last");
  child.request_stop();
  child.join();
  // ... and from the master to the child.
  ASSERT_FALSE(m.listener->send("7", message_of({"a task", large})));
  ASSERT_TRUE(m.run_until([&] {
    child_io.poll();
    return !child_got.empty();
  }));
  ASSERT_EQ(child_got[0].size(), 2u);
  EXPECT_EQ(child_got[0][1].to_string(), large);
}

TEST(tls_link, a_child_with_another_key_is_refused) {
  master m;
  asio::io_context child_io;
  auto f = std::async(std::launch::async, [&] { return connect_tls_link(child_io, m.address, "7", other_key, 10s, 10s); });
  m.run_until([&] { return f.wait_for(0s) == std::future_status::ready; });
  EXPECT_THROW(f.get(), fiber::error);
  EXPECT_EQ(m.listener->send("7", message_of({"x"})), std::make_error_code(std::errc::host_unreachable));
}

TEST(tls_link, a_child_the_master_does_not_expect_is_refused) {
  master m;
  asio::io_context child_io;
  auto link = connect_child(m, child_io, "9", job_key);  // the key, but no such child
  bool closed = false;
  link->start([](multipart) {}, [&](std::error_code) { closed = true; });
  ASSERT_TRUE(m.run_until([&] {
    child_io.poll();
    return closed;
  }));
  EXPECT_TRUE(m.received.empty());
}

TEST(tls_link, a_connection_that_never_handshakes_is_closed_at_its_deadline) {
  master m(10s, 200ms);
  asio::ip::tcp::socket s(m.io);
  auto port = static_cast<unsigned short>(std::stoi(m.address.substr(m.address.rfind(':') + 1)));
  s.connect({asio::ip::make_address("127.0.0.1"), port});
  char byte;
  std::error_code ec;
  bool ended = false;
  s.async_read_some(asio::buffer(&byte, 1), [&](std::error_code e, std::size_t) {
    ec = e;
    ended = true;
  });
  ASSERT_TRUE(m.run_until([&] { return ended; }));
  EXPECT_EQ(ec, asio::error::eof);
}

TEST(tls_link, a_silent_child_is_closed_and_hears_it) {
  master m(300ms);
  asio::io_context child_io;
  auto link = connect_child(m, child_io, "7", job_key);
  std::error_code why;
  bool closed = false;
  link->start([](multipart) {}, [&](std::error_code ec) {
    why = ec;
    closed = true;
  });
  ASSERT_TRUE(m.run_until([&] {
    child_io.poll();
    return closed;
  }));
  EXPECT_EQ(m.listener->send("7", message_of({"x"})), std::make_error_code(std::errc::host_unreachable));
}

// The pulse comes twenty times as often as the silence allowed, so that a loaded machine that
// holds it back for a while does not make a live link look silent; the test runs for three silences.
TEST(tls_link, a_busy_child_is_kept_by_its_pulse) {
  master m(600ms);
  asio::io_context child_io;
  auto link = connect_child(m, child_io, "7", job_key);
  // The child's own loop never runs here, as in a long task: only the pulse speaks.
  link_pulse pulse(link, 30ms, 10s, [] { ADD_FAILURE() << "the master is not gone"; });
  auto until = std::chrono::steady_clock::now() + 1800ms;
  m.run_until([&] { return std::chrono::steady_clock::now() >= until; }, 10s);
  EXPECT_FALSE(m.listener->send("7", message_of({"still linked"})));
  // The pulses came as messages the master ignores (kind::probe).
  ASSERT_FALSE(m.received.empty());
  EXPECT_EQ(parse_header(m.received.front().second[0])->type, kind::probe);
}

TEST(tls_link, a_busy_childs_pulse_ends_it_when_the_master_hangs_up) {
  master m;
  asio::io_context child_io;
  auto link = connect_child(m, child_io, "7", job_key);
  std::promise<void> lost;
  link_pulse pulse(link, 20ms, 10s, [&] { lost.set_value(); });
  m.listener->close();
  EXPECT_EQ(lost.get_future().wait_for(60s), std::future_status::ready);  // bounded only against a hang
}
