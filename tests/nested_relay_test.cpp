// What a nested master passes up, kind by kind: the channels' traffic to their owners above, the
// recorder's events and the pools' views as they came; a child's hello and done stay with it.
#include "runtime/nested/nested_relay.hpp"

#include <gtest/gtest.h>

namespace {
using fiber::detail::kind;
using fiber::detail::relay;
using fiber::detail::relay_of;
}  // namespace

TEST(nested_relay, the_channels_traffic_goes_to_its_owners_above) {
  EXPECT_EQ(relay_of(kind::put), relay::channel_put);
  EXPECT_EQ(relay_of(kind::get), relay::channel_get);
  EXPECT_EQ(relay_of(kind::cancel_get), relay::cancel_get);
  EXPECT_EQ(relay_of(kind::maker_gone), relay::maker_gone);
}

TEST(nested_relay, the_recorders_events_and_the_pools_views_go_up_as_they_came) {
  for (auto k : {kind::record, kind::record_batch, kind::pool_view}) EXPECT_EQ(relay_of(k), relay::as_is) << int(k);
  fiber::detail::multipart payload;
  payload.emplace_back("frame", 5);
  auto m = fiber::detail::passed_up(kind::pool_view, 1, std::move(payload));
  ASSERT_EQ(m.size(), 2u);
  auto h = fiber::detail::parse_header(m[0]);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->type, kind::pool_view);
  EXPECT_EQ(h->aux, 1u);
  EXPECT_EQ(h->channel, 0u) << "the child's channel was with this master, not the one above";
  EXPECT_EQ(m[1].to_string(), "frame");
}

TEST(nested_relay, a_childs_hello_done_and_pulse_stay_with_its_master) {
  for (auto k : {kind::hello, kind::done, kind::probe}) EXPECT_EQ(relay_of(k), relay::here) << int(k);
}

// Every runtime kind has a rule; what only a master sends down stays here (a child that sends
// one is told it is unexpected, nested or not).
TEST(nested_relay, every_runtime_kind_has_a_rule) {
  for (int k = 1; k <= fiber::detail::last_runtime_kind; ++k) {
    auto r = relay_of(static_cast<kind>(k));
    EXPECT_LE(static_cast<int>(r), static_cast<int>(relay::maker_gone)) << k;
  }
  for (auto k : {kind::welcome, kind::refuse, kind::item, kind::cancelled, kind::failure, kind::service_gone})
    EXPECT_EQ(relay_of(k), relay::here) << int(k);
}
