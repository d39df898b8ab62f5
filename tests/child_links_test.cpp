// How a master's children reach it, on this host's real sockets: the transport the config picks,
// a child that proves itself heard under its routing id, a child the master does not expect kept
// out, a child's link closing told of, a message to a child that has no link an error, and nothing
// heard after close().
#include "runtime/links/child_links.hpp"

#include <gtest/gtest.h>

#include <asio/io_context.hpp>
#include <future>

#include "fiber/error.hpp"
#include "runtime/links/direct_connect.hpp"
#include "runtime/protocol.hpp"

using namespace fiber::detail;
using namespace std::chrono_literals;

namespace {
struct links_fixture : ::testing::Test {
  asio::io_context io;
  zmq_context zctx;
  fiber::config cfg;
  std::string job_id = "linkstest";
  job_keys keys = job_keys::generate();
  std::vector<std::pair<std::string, header>> heard;
  std::unique_ptr<backend> engine;
  std::shared_ptr<child_links> links;

  void make() {
    engine = make_backend(io, cfg, job_id);
    links = std::make_shared<child_links>(
        io, zctx, cfg, job_id, keys,
        [this](const std::string& peer, multipart&& m, std::size_t first) { heard.emplace_back(peer, *parse_header(m.at(first))); },
        [](const std::string& id) { return id == "7" || id == "6" || id == "5"; });
  }
  /// Runs the loop until `done`, at most a minute (against a hang, not as a measurement).
  template <class F>
  bool run_until(F done) {
    auto end = std::chrono::steady_clock::now() + 60s;
    while (!done() && std::chrono::steady_clock::now() < end) io.run_one_for(100ms);
    return done();
  }
  /// A child's link, connected on a thread of its own while this loop runs.
  std::shared_ptr<stream_link> connect(asio::io_context& child_io, const std::string& id) {
    auto f = std::async(std::launch::async, [&] { return connect_direct_link(child_io, links->endpoint(), id, keys.password, std::chrono::seconds(30)); });
    run_until([&] { return f.wait_for(0s) == std::future_status::ready; });
    return f.get();
  }
};

TEST_F(links_fixture, on_this_host_children_link_directly_and_are_heard_under_their_routing_id) {
  make();
  auto& endpoint = links->listen(*engine);
  EXPECT_TRUE(endpoint.starts_with(direct_scheme)) << endpoint;
  EXPECT_TRUE(links->children_on_this_host());
  EXPECT_FALSE(links->heartbeats()) << "a unix socket's child is watched through its pidfd";
  EXPECT_EQ(links->worker_credentials(), keys.for_worker(/*plain=*/true)) << "a local child gets the password only";
  asio::io_context child_io;
  auto child = connect(child_io, "7");
  child->send(make_message(kind::hello, {}, "{}"));
  ASSERT_TRUE(run_until([&] { return !heard.empty(); }));
  EXPECT_EQ(heard[0].first, "7");
  EXPECT_EQ(heard[0].second.type, kind::hello);
  EXPECT_FALSE(links->send("7", make_message(kind::welcome, {})));
  EXPECT_TRUE(links->send("8", make_message(kind::welcome, {}))) << "no link, and the error says so";
}

// A child that ends without a word (killed, crashed) closes its link: the master hears of it,
// and a backend that polls for ends (Slurm) looks soon instead of at its quiet pace.
TEST_F(links_fixture, a_childs_link_closing_is_told_of_under_its_routing_id) {
  make();
  std::vector<std::string> left;
  links->on_child_left([&](const std::string& peer) { left.push_back(peer); });
  links->listen(*engine);
  asio::io_context child_io;
  auto child = connect(child_io, "7");
  child->send(make_message(kind::hello, {}, "{}"));
  ASSERT_TRUE(run_until([&] { return !heard.empty(); }));
  EXPECT_TRUE(left.empty());
  child->close();
  child_io.poll();  // what the close cancelled completes
  ASSERT_TRUE(run_until([&] { return !left.empty(); }));
  EXPECT_EQ(left, std::vector<std::string>{"7"});
}

TEST_F(links_fixture, a_child_the_master_does_not_expect_is_not_heard) {
  make();
  links->listen(*engine);
  asio::io_context child_io;
  std::shared_ptr<stream_link> stranger;
  try {
    stranger = connect(child_io, "9");
    stranger->send(make_message(kind::hello, {}, "{}"));
  } catch (const std::exception&) {
  }
  auto child = connect(child_io, "7");  // heard after the stranger's attempt, on the same loop
  child->send(make_message(kind::done, {}));
  ASSERT_TRUE(run_until([&] { return !heard.empty(); }));
  ASSERT_EQ(heard.size(), 1u);
  EXPECT_EQ(heard[0].first, "7");
}

TEST_F(links_fixture, children_on_this_host_link_through_shared_memory_while_the_master_has_lanes_to_give) {
  cfg.shared_links = 1;
  make();
  links->listen(*engine);
  asio::io_context first_io, second_io, third_io;
  auto first = connect(first_io, "7");
  auto second = connect(second_io, "6");
  EXPECT_TRUE(first->shared());
  EXPECT_FALSE(second->shared()) << "past shared_links: its unix socket";
  std::vector<kind> to_first;
  first->start([&](multipart m) { to_first.push_back(parse_header(m.at(0))->type); }, [](std::error_code) {});
  first->send(make_message(kind::hello, {}, "{}"));
  second->send(make_message(kind::hello, {}, "{}"));
  ASSERT_TRUE(run_until([&] { return heard.size() == 2; }));
  EXPECT_FALSE(links->send("7", make_message(kind::welcome, {})));
  auto end = std::chrono::steady_clock::now() + 60s;  // against a hang
  while (to_first.empty() && std::chrono::steady_clock::now() < end) first_io.run_one_for(100ms);
  ASSERT_EQ(to_first.size(), 1u);
  EXPECT_EQ(to_first[0], kind::welcome);
  // The lane comes back when its child's link closes, for the next child.
  std::vector<std::string> left;
  links->on_child_left([&](const std::string& peer) { left.push_back(peer); });
  first->close();
  first_io.poll();
  ASSERT_TRUE(run_until([&] { return !left.empty(); }));
  auto third = connect(third_io, "5");
  EXPECT_TRUE(third->shared());
}

TEST_F(links_fixture, shared_memory_is_never_passed_to_a_process_that_does_not_know_the_password) {
  cfg.shared_links = 4;
  make();
  links->listen(*engine);
  asio::io_context child_io;
  auto f = std::async(std::launch::async, [&] {
    return connect_direct_link(child_io, links->endpoint(), "7", "not the job's password", std::chrono::seconds(30));
  });
  ASSERT_TRUE(run_until([&] { return f.wait_for(0s) == std::future_status::ready; }));
  try {
    f.get();
    FAIL() << "linked without the password";
  } catch (const fiber::error& e) {
    // Closed after the greeting, before any answer: no descriptor came with it.
    EXPECT_EQ(e.code(), std::make_error_code(std::errc::connection_reset)) << e.what();
  }
}

TEST_F(links_fixture, zeromq_on_this_host_is_an_ipc_router_without_heartbeats) {
  cfg.local_transport = "zeromq";
  make();
  auto& endpoint = links->listen(*engine);
  EXPECT_TRUE(endpoint.starts_with("ipc://")) << endpoint;
  EXPECT_TRUE(links->children_on_this_host());
  EXPECT_FALSE(links->heartbeats());
  EXPECT_TRUE(links->hub_name().empty());
}

TEST_F(links_fixture, after_close_nothing_listens_and_nothing_is_sent) {
  make();
  links->close();
  try {
    links->listen(*engine);
    FAIL() << "listened after close";
  } catch (const fiber::error& e) {
    EXPECT_EQ(e.code(), make_error_code(fiber::errc::closed));
  }
  EXPECT_TRUE(links->send("7", make_message(kind::welcome, {})));
}

}  // namespace
