// A host hub (runtime/hubs/host_hub, runtime/hubs/hub_wire): children on a host link to it as to a master
// on their host, and the master reaches them through its one TLS link, both ways; the master
// refuses the children it does not expect and the hubs it did not start; a child's leaving and
// the master's going are heard on the other side.
#include <gtest/gtest.h>

#include <unistd.h>

#include <asio/io_context.hpp>
#include <future>
#include <thread>

#include "hub_harness.hpp"
#include "runtime/links/direct_wire.hpp"
#include "runtime/hubs/host_hub.hpp"
#include "runtime/protocol.hpp"
#include "transport/tls_session.hpp"

using namespace fiber::detail;
using namespace std::chrono_literals;
using namespace hub_harness;

TEST(host_hub, children_behind_a_hub_are_reached_like_any_other_both_ways) {
  master m;
  hub h(m);
  child seven(h, "7"), eight(h, "8");
  ASSERT_TRUE(m.run_until([&] { return m.listener->linked_through_hubs() == 2; }));
  ASSERT_FALSE(seven.link->send(message_of({"from seven"})));
  ASSERT_FALSE(eight.link->send(message_of({"from eight", "two parts"})));
  ASSERT_TRUE(m.run_until([&] { return m.received.size() == 2; }));
  for (auto& [id, msg] : m.received) {
    if (id == "7") {
      EXPECT_EQ(msg.size(), 1u);
      EXPECT_EQ(msg[0].to_string(), "from seven");
    } else {
      EXPECT_EQ(id, "8");
      ASSERT_EQ(msg.size(), 2u);
      EXPECT_EQ(msg[1].to_string(), "two parts");
    }
  }
  // From the master: many messages in one turn, each to its child, in order.
  for (int i = 0; i < 50; ++i) {
    ASSERT_FALSE(m.listener->send("7", message_of({"to seven", std::to_string(i)})));
    ASSERT_FALSE(m.listener->send("8", message_of({"to eight", std::to_string(i)})));
  }
  ASSERT_TRUE(m.run_until([&] {
    seven.io.poll();
    eight.io.poll();
    return seven.received.size() == 50 && eight.received.size() == 50;
  }));
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(seven.received[i][0].to_string(), "to seven");
    EXPECT_EQ(seven.received[i][1].to_string(), std::to_string(i));
    EXPECT_EQ(eight.received[i][0].to_string(), "to eight");
  }
}

TEST(host_hub, a_childs_pulses_stop_at_the_hub_and_its_messages_go_on) {
  master m;
  hub h(m);
  child seven(h, "7");
  ASSERT_FALSE(seven.link->send(make_message(kind::probe, {})));
  ASSERT_FALSE(seven.link->send(message_of({"after the pulse"})));
  ASSERT_TRUE(m.run_until([&] { return !m.received.empty(); }));
  ASSERT_EQ(m.received.size(), 1u);
  EXPECT_EQ(m.received[0].second[0].to_string(), "after the pulse");
}

TEST(host_hub, a_child_the_master_does_not_expect_is_refused) {
  master m;
  hub h(m);
  child stranger(h, "9");
  ASSERT_FALSE(stranger.link->send(message_of({"let me in"})));
  ASSERT_TRUE(m.run_until([&] {
    stranger.io.poll();
    return stranger.closed;
  }));
  EXPECT_TRUE(m.received.empty());
  EXPECT_EQ(m.listener->linked_through_hubs(), 0u);
  EXPECT_EQ(m.listener->send("9", message_of({"x"})), std::make_error_code(std::errc::host_unreachable));
}

TEST(host_hub, a_child_that_leaves_is_unreachable_for_the_master) {
  master m;
  hub h(m);
  {
    child seven(h, "7");
    ASSERT_TRUE(m.run_until([&] { return m.listener->linked_through_hubs() == 1; }));
    seven.link->close();
  }
  ASSERT_TRUE(m.run_until([&] { return m.listener->linked_through_hubs() == 0; }));
  EXPECT_EQ(m.listener->send("7", message_of({"x"})), std::make_error_code(std::errc::host_unreachable));
  // ... and may link again (a child's link is its own, not its id's).
  child again(h, "7");
  ASSERT_TRUE(m.run_until([&] { return m.listener->linked_through_hubs() == 1; }));
}

TEST(host_hub, a_silent_child_is_closed_by_its_hub_and_the_master_hears_it_left) {
  master m;
  hub h(m, "hub-1", 200ms);  // a child that sends nothing for 200 ms has stopped
  child seven(h, "7");
  ASSERT_TRUE(m.run_until([&] { return m.listener->linked_through_hubs() == 1; }));
  ASSERT_TRUE(m.run_until([&] {
    seven.io.poll();
    return seven.closed && m.listener->linked_through_hubs() == 0;
  }));
}

// The pulses below come twenty times as often as the silence allowed, so that a loaded machine
// that holds a pulse back for a while does not make a live link look silent; the test runs for
// three silences.
TEST(host_hub, a_child_that_speaks_stays_linked_past_the_silence) {
  master m;
  hub h(m, "hub-1", 600ms);
  child seven(h, "7");
  ASSERT_TRUE(m.run_until([&] { return m.listener->linked_through_hubs() == 1; }));
  auto until = std::chrono::steady_clock::now() + 1800ms;
  for (auto next = std::chrono::steady_clock::now(); next < until; next += 30ms) {
    ASSERT_FALSE(seven.link->send(make_message(kind::probe, {})));
    m.run_until([&] { return std::chrono::steady_clock::now() >= next + 30ms; }, 10s);
  }
  seven.io.poll();
  EXPECT_FALSE(seven.closed);
  EXPECT_EQ(m.listener->linked_through_hubs(), 1u);
}

TEST(host_hub, a_hub_whose_children_are_idle_pulses_and_stays_linked) {
  master m(600ms);             // the master closes a hub link silent for 600 ms
  hub h(m, "hub-1", 60s, false, 30ms);  // ... and the hub speaks every 30 ms when it has nothing else to say
  auto until = std::chrono::steady_clock::now() + 1800ms;
  m.run_until([&] { return std::chrono::steady_clock::now() >= until; }, 10s);
  EXPECT_EQ(m.listener->linked(), 1u);
  EXPECT_FALSE(h.ended);
}

TEST(host_hub, when_the_master_goes_the_children_behind_the_hub_hear_it) {
  master m;
  hub h(m);
  child seven(h, "7");
  ASSERT_TRUE(m.run_until([&] { return m.listener->linked_through_hubs() == 1; }));
  m.listener->close();
  ASSERT_TRUE(m.run_until([&] {
    seven.io.poll();
    return seven.closed && h.ended;
  }));
}

TEST(host_hub, a_hub_the_master_did_not_start_is_refused) {
  master m;
  hub stranger(m, "hub-2");
  ASSERT_TRUE(m.run_until([&] { return stranger.ended.load(); }));
  EXPECT_EQ(m.listener->linked(), 0u);
}
