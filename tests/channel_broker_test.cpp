// The master's queue broker on its own: which reader gets which message, and nothing is lost when
// a reader is gone.
#include "runtime/channels/channel_broker.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace {
using fiber::detail::channel_broker;
using fiber::detail::channel_reader;
using fiber::detail::multipart;

multipart text(const std::string& s) {
  multipart m;
  m.emplace_back(s.data(), s.size());
  return m;
}

struct delivered {
  std::string peer;
  std::uint64_t request;
  std::string body;
  bool may_run_inline;
};

struct broker_fixture : ::testing::Test {
  std::vector<delivered> log;
  std::set<std::string> gone;  // readers whose connection is gone
  channel_broker broker{[this](const channel_reader& r, std::uint64_t, multipart& payload, bool may_run_inline) {
    if (gone.count(r.peer)) return false;
    log.push_back({r.peer, r.request, payload.at(0).to_string(), may_run_inline});
    return true;
  }};
};

TEST_F(broker_fixture, messages_wait_for_readers_and_go_out_in_order) {
  broker.put(1, text("a"), false);
  broker.put(1, text("b"), false);
  EXPECT_EQ(broker.queued(1), 2u);
  broker.get(1, {"", 10});
  broker.get(1, {"w1", 11});
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].body, "a");
  EXPECT_EQ(log[0].request, 10u);
  EXPECT_FALSE(log[0].may_run_inline);  // handed over inside the get's own call
  EXPECT_EQ(log[1].body, "b");
  EXPECT_EQ(log[1].peer, "w1");
  EXPECT_EQ(broker.queued(1), 0u);
}

TEST_F(broker_fixture, readers_wait_for_messages_first_come_first_served) {
  broker.get(7, {"w1", 1});
  broker.get(7, {"w2", 2});
  EXPECT_EQ(broker.waiting(7), 2u);
  broker.put(7, text("x"), true);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].peer, "w1");
  EXPECT_TRUE(log[0].may_run_inline);  // from the network: a local reader may resume inline
  EXPECT_EQ(broker.waiting(7), 1u);
}

TEST_F(broker_fixture, a_message_for_a_reader_that_is_gone_goes_to_the_next) {
  broker.get(3, {"dead", 1});
  broker.get(3, {"alive", 2});
  gone.insert("dead");
  broker.put(3, text("m"), true);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].peer, "alive");
  EXPECT_EQ(log[0].body, "m");
}

TEST_F(broker_fixture, a_message_nobody_alive_can_take_stays_queued) {
  gone.insert("dead");
  broker.get(3, {"dead", 1});
  broker.put(3, text("kept"), true);
  EXPECT_TRUE(log.empty());
  EXPECT_EQ(broker.queued(3), 1u);
  broker.get(3, {"dead", 2});  // still gone: the message stays
  EXPECT_EQ(broker.queued(3), 1u);
  broker.get(3, {"", 3});
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].body, "kept");
}

TEST_F(broker_fixture, a_cancelled_or_forgotten_reader_gets_nothing) {
  broker.get(5, {"w1", 1});
  broker.get(5, {"w2", 2});
  broker.get(5, {"w1", 3});
  EXPECT_TRUE(broker.cancel(5, "w2", 2));
  EXPECT_FALSE(broker.cancel(5, "w2", 2));  // not waiting any more
  broker.forget_peer("w1");
  EXPECT_EQ(broker.waiting(5), 0u);
  broker.put(5, text("later"), false);
  EXPECT_TRUE(log.empty());
  EXPECT_EQ(broker.queued(5), 1u);
}

TEST_F(broker_fixture, a_released_channel_keeps_its_waiting_readers_and_frees_an_idle_one) {
  broker.put(8, text("unread"), false);
  broker.release(8);
  EXPECT_EQ(broker.queued(8), 0u);  // gone, with a warning
  broker.get(9, {"w", 1});
  broker.release(9);
  EXPECT_EQ(broker.waiting(9), 1u);
  broker.put(9, text("still"), false);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].body, "still");
}

}  // namespace
