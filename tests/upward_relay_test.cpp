// A nested master's relay on its own: what its children send that goes up reaches the master
// above, the answers come back down to the child that asked, and a child that ends takes its
// asks with it.
#include "runtime/nested/upward_relay.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fiber/error.hpp"

namespace {
using namespace fiber::detail;

multipart text(const std::string& s) {
  multipart m;
  m.emplace_back(s.data(), s.size());
  return m;
}

/// The route to the master above, as it is asked.
struct recording_route final : channel_route {
  std::vector<std::string> log;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> gets;  // channel, request
  void put(std::uint64_t channel, multipart&& p) override { log.push_back("put " + std::to_string(channel) + " " + p.at(0).to_string()); }
  void get(std::uint64_t channel, std::uint64_t request) override { gets.push_back({channel, request}); }
  void cancel_get(std::uint64_t channel, std::uint64_t request) override {
    log.push_back("cancel " + std::to_string(channel) + " " + std::to_string(request));
  }
  void release(std::uint64_t) noexcept override {}
  void maker_gone(std::uint32_t prefix) override { log.push_back("maker_gone " + std::to_string(prefix)); }
  void shutdown() noexcept override {}
};

struct relay_fixture : ::testing::Test {
  recording_route up;
  std::vector<multipart> sent_up;
  std::vector<std::pair<std::string, header>> sent_down;
  pending_gets gets;
  std::shared_ptr<upward_relay> relay = std::make_shared<upward_relay>(
      up, [this](multipart&& m) { sent_up.push_back(std::move(m)); }, gets,
      [this](const std::string& peer, multipart&& m) -> std::error_code {
        sent_down.push_back({peer, *parse_header(m.at(0))});
        return {};
      });
  bool from(const std::string& peer, header h, multipart payload = {}) { return relay->relay(peer, h, payload); }
};

TEST_F(relay_fixture, a_childs_report_goes_up_as_is_and_its_handshake_stays_here) {
  EXPECT_TRUE(from("3", header{.type = kind::pool_view, .aux = 1}, text("state")));
  ASSERT_EQ(sent_up.size(), 1u);
  EXPECT_EQ(parse_header(sent_up[0].at(0))->type, kind::pool_view);
  EXPECT_EQ(parse_header(sent_up[0].at(0))->aux, 1u);
  EXPECT_EQ(sent_up[0].at(1).to_string(), "state");
  EXPECT_FALSE(from("3", header{.type = kind::hello}));
  EXPECT_FALSE(from("3", header{.type = kind::done}));
  EXPECT_EQ(sent_up.size(), 1u);
}

TEST_F(relay_fixture, a_childs_read_goes_up_under_a_request_of_ours_and_its_item_comes_down_under_its_own) {
  EXPECT_TRUE(from("3", header{.type = kind::get, .channel = 99, .request = 5}));
  ASSERT_EQ(up.gets.size(), 1u);
  EXPECT_EQ(relay->reads_pending(), 1u);
  gets.complete(up.gets[0].second, {}, text("item"), false);
  ASSERT_EQ(sent_down.size(), 1u);
  EXPECT_EQ(sent_down[0].first, "3");
  EXPECT_EQ(sent_down[0].second.type, kind::item);
  EXPECT_EQ(sent_down[0].second.request, 5u);
  EXPECT_EQ(relay->reads_pending(), 0u);
}

TEST_F(relay_fixture, a_read_withdrawn_above_comes_down_cancelled_and_one_that_failed_names_why) {
  from("3", header{.type = kind::get, .channel = 99, .request = 5});
  from("3", header{.type = kind::get, .channel = 98, .request = 6});
  EXPECT_TRUE(from("3", header{.type = kind::cancel_get, .channel = 99, .request = 5}));
  ASSERT_EQ(up.log.size(), 1u);
  EXPECT_EQ(up.log[0], "cancel 99 " + std::to_string(up.gets[0].second));
  gets.complete(up.gets[0].second, make_error_code(fiber::errc::timeout), {}, false);
  gets.complete(up.gets[1].second, make_error_code(fiber::errc::maker_gone), {}, false);
  ASSERT_EQ(sent_down.size(), 2u);
  EXPECT_EQ(sent_down[0].second.type, kind::cancelled);
  EXPECT_EQ(sent_down[1].second.type, kind::failure);
  EXPECT_EQ(sent_down[1].second.aux, static_cast<std::uint32_t>(fiber::errc::maker_gone));
}

TEST_F(relay_fixture, a_call_passed_up_is_answered_down_to_its_caller_under_its_own_number) {
  relay->pass_call_up("4", header{.type = kind::hello, .flags = flag_expects_reply, .channel = 12, .request = 8}, text("call"));
  ASSERT_EQ(sent_up.size(), 1u);
  auto ours = parse_header(sent_up[0].at(0))->request;
  EXPECT_NE(ours, 8u);
  EXPECT_NE(ours & (std::uint64_t{1} << 63), 0u);  // never one of this process's own numbers
  multipart reply = text("answer");
  EXPECT_FALSE(relay->pass_reply_down(header{.type = kind::hello, .request = ours + 1}, reply));
  EXPECT_TRUE(relay->pass_reply_down(header{.type = kind::hello, .request = ours}, reply));
  ASSERT_EQ(sent_down.size(), 1u);
  EXPECT_EQ(sent_down[0].first, "4");
  EXPECT_EQ(sent_down[0].second.request, 8u);
  EXPECT_EQ(relay->calls_pending(), 0u);
}

TEST_F(relay_fixture, a_child_that_ends_takes_its_queues_its_reads_and_its_calls_with_it) {
  relay->note_prefix("3", 42);
  from("3", header{.type = kind::get, .channel = 99, .request = 5});
  relay->pass_call_up("3", header{.type = kind::hello, .flags = flag_expects_reply, .request = 8}, text("call"));
  relay->child_ended("3");
  EXPECT_EQ(up.log, (std::vector<std::string>{"maker_gone 42", "cancel 99 " + std::to_string(up.gets[0].second)}));
  EXPECT_EQ(relay->calls_pending(), 0u);
}

TEST_F(relay_fixture, a_childs_put_and_its_makers_end_go_up) {
  EXPECT_TRUE(from("3", header{.type = kind::put, .channel = 77}, text("x")));
  EXPECT_TRUE(from("3", header{.type = kind::maker_gone, .aux = 9}));
  EXPECT_EQ(up.log, (std::vector<std::string>{"put 77 x", "maker_gone 9"}));
}

}  // namespace
