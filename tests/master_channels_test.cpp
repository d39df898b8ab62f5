// The top master's queues and pipes on their own: a child's reads answered through its link, this
// process's through pending_gets, prefixes handed out, and the queues of a process that ended.
#include "runtime/channels/master_channels.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "fiber/error.hpp"
#include "runtime/protocol.hpp"

namespace {
using namespace fiber::detail;

multipart text(const std::string& s) {
  multipart m;
  m.emplace_back(s.data(), s.size());
  return m;
}

struct sent {
  std::string peer;
  header h;
  std::vector<std::string> frames;
};

struct channels_fixture : ::testing::Test {
  std::vector<sent> out;
  std::set<std::string> gone;  // children whose link is gone
  pending_gets gets;
  master_channels channels{gets, [this](const std::string& peer, multipart&& parts) -> std::error_code {
    if (gone.contains(peer)) return make_error_code(fiber::errc::closed);
    sent s{peer, *parse_header(parts.at(0)), {}};
    for (std::size_t i = 1; i < parts.size(); ++i) s.frames.push_back(parts[i].to_string());
    out.push_back(std::move(s));
    return {};
  }};
  struct read {
    std::error_code ec;
    std::string body;
  };
  std::vector<read> reads;
  std::uint64_t local_get(std::uint64_t channel) {
    auto request = gets.add(channel, [this](std::error_code ec, multipart m, bool) {
      reads.push_back({ec, m.empty() ? std::string() : m[0].to_string()});
    });
    channels.get(channel, request);
    return request;
  }
  static std::uint64_t channel_of(std::uint32_t prefix, std::uint32_t n) { return (std::uint64_t{prefix} << 32) | n; }
};

TEST_F(channels_fixture, a_childs_read_is_answered_over_its_link_and_this_processs_through_its_pending_get) {
  auto ch = channel_of(7, 1);
  channels.get_from("3", ch, 41);
  local_get(ch);
  channels.put(ch, text("to the child"));
  channels.put_from("4", ch, text("to this process"));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].peer, "3");
  EXPECT_EQ(out[0].h.type, kind::item);
  EXPECT_EQ(out[0].h.request, 41u);
  EXPECT_EQ(out[0].frames.at(0), "to the child");
  ASSERT_EQ(reads.size(), 1u);
  EXPECT_FALSE(reads[0].ec);
  EXPECT_EQ(reads[0].body, "to this process");
}

TEST_F(channels_fixture, a_message_for_a_reader_whose_link_is_gone_waits_for_the_next_reader) {
  auto ch = channel_of(7, 2);
  channels.get_from("3", ch, 1);
  gone.insert("3");
  channels.put(ch, text("kept"));
  local_get(ch);
  ASSERT_EQ(reads.size(), 1u);
  EXPECT_EQ(reads[0].body, "kept");
}

TEST_F(channels_fixture, a_prefix_asked_on_channel_zero_is_unique_and_ends_with_the_child_it_came_through) {
  channels.get_from("5", master_channels::prefix_channel, 9);
  channels.get_from("5", master_channels::prefix_channel, 10);
  ASSERT_EQ(out.size(), 2u);
  std::uint32_t first = 0, second = 0;
  std::memcpy(&first, out[0].frames.at(0).data(), 4);
  std::memcpy(&second, out[1].frames.at(0).data(), 4);
  EXPECT_NE(first, second);
  EXPECT_NE(first, 0u);
  auto ch = channel_of(first, 1);
  local_get(ch);
  channels.child_ended("5", /*end_its_channels=*/true);  // its subtree's queues end with it
  ASSERT_EQ(reads.size(), 1u);
  EXPECT_EQ(reads[0].ec, make_error_code(fiber::errc::maker_gone));
  channels.put(channel_of(second, 1), text("dropped"));
  local_get(channel_of(second, 1));
  ASSERT_EQ(reads.size(), 2u);
  EXPECT_EQ(reads[1].ec, make_error_code(fiber::errc::maker_gone));
}

TEST_F(channels_fixture, a_child_that_ended_while_the_master_ends_leaves_its_queues_to_the_masters_end) {
  auto ch = channel_of(6, 1);
  local_get(ch);
  channels.child_ended("6", /*end_its_channels=*/false);
  EXPECT_TRUE(reads.empty());
  channels.shutdown();
  ASSERT_EQ(reads.size(), 1u);
  EXPECT_EQ(reads[0].ec, make_error_code(fiber::errc::closed));
}

TEST_F(channels_fixture, a_childs_read_of_an_ended_makers_queue_fails_with_maker_gone) {
  channels.maker_gone(8);
  channels.get_from("3", channel_of(8, 1), 77);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.type, kind::failure);
  EXPECT_EQ(out[0].h.aux, static_cast<std::uint32_t>(fiber::errc::maker_gone));
  channels.put_from("4", channel_of(8, 1), text("dropped"));
  EXPECT_EQ(out.size(), 1u);
}

TEST_F(channels_fixture, a_withdrawn_read_is_answered_cancelled_and_a_read_already_answered_is_not) {
  auto ch = channel_of(7, 3);
  channels.get_from("3", ch, 5);
  channels.cancel_from("3", ch, 5);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.type, kind::cancelled);
  channels.get_from("3", ch, 6);
  channels.put(ch, text("x"));
  channels.cancel_from("3", ch, 6);  // its item is on its way: no cancelled
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].h.type, kind::item);
}

}  // namespace
