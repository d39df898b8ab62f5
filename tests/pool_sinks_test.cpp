// The imap sink on its own, without a pool: results that come before their turn wait in place and
// leave in order, an item's error stops a batch at its position, a result that does not decode as
// the call's type is that item's error, and what waits counts against the stream's bound.
#include "fiber/detail/pool_sinks.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "fiber/error.hpp"
#include "transport/message_frames.hpp"

namespace {
using namespace fiber::detail;

auto encode_int = [](fiber::writer& w, int x) { w.value(x); };
using sink_of_ints = stream_sink<int, std::vector<int>::const_iterator, decltype(encode_int)>;

template <class T>
message message_of(const T& v) {
  fiber::writer w;
  w.value(v);
  return message(message::frames::whole(to_frames(w)));
}

/// Everything the sink hands out now: the values, and whether an error came (it stops there).
struct taken {
  std::vector<int> values;
  bool error = false;
  bool ended = false;
};
taken take_all(sink_of_ints& s) {
  taken t;
  for (;;) {
    std::optional<int> v;
    std::exception_ptr e;
    if (!s.take(v, e)) return t;
    if (e) {
      t.error = true;
      return t;
    }
    if (!v) {
      t.ended = true;
      return t;
    }
    t.values.push_back(*v);
  }
}

struct pool_sinks : ::testing::Test {
  std::vector<int> input = std::vector<int>(8, 0);
  sink_of_ints make(bool ordered, std::size_t bound = 64) {
    return sink_of_ints(input.cbegin(), input.cend(), encode_int, ordered, bound, 0);
  }
};

TEST_F(pool_sinks, results_ahead_of_their_turn_wait_and_leave_in_order) {
  auto s = make(true);
  s.on_result(2, message_of(20));
  s.on_result(5, message_of(50));
  s.on_result(1, message_of(10));
  EXPECT_TRUE(take_all(s).values.empty()) << "item 0 has not come";
  s.on_result(0, message_of(0));
  EXPECT_EQ(take_all(s).values, (std::vector<int>{0, 10, 20}));
  s.on_result(4, message_of(40));
  s.on_result(3, message_of(30));
  EXPECT_EQ(take_all(s).values, (std::vector<int>{30, 40, 50}));
}

TEST_F(pool_sinks, a_batch_stops_before_an_error_and_the_error_comes_at_its_position) {
  auto s = make(true);
  s.on_result(0, message_of(0));
  s.on_error(1, std::make_exception_ptr(std::runtime_error("item 1 failed")));
  s.on_result(2, message_of(20));
  std::vector<int> batch;
  s.take_ready(batch, 100);
  EXPECT_EQ(batch, (std::vector<int>{0}));
  auto t = take_all(s);
  EXPECT_TRUE(t.error);
  EXPECT_EQ(take_all(s).values, (std::vector<int>{20}));
}

TEST_F(pool_sinks, a_result_that_does_not_decode_as_the_calls_type_is_that_items_error) {
  auto s = make(true);
  s.on_result(0, message_of(std::string("not an int, and longer than one")));
  s.on_result(1, message_of(10));
  EXPECT_TRUE(take_all(s).error);
  EXPECT_EQ(take_all(s).values, (std::vector<int>{10}));
}

TEST_F(pool_sinks, unordered_results_leave_as_they_come) {
  auto s = make(false);
  s.on_result(3, message_of(30));
  s.on_result(0, message_of(0));
  EXPECT_EQ(take_all(s).values, (std::vector<int>{30, 0}));
}

TEST_F(pool_sinks, results_waiting_for_their_turn_count_against_the_bound) {
  auto s = make(true, 2);
  EXPECT_TRUE(s.wants_more());
  s.on_result(1, message_of(10));
  EXPECT_TRUE(s.wants_more());
  s.on_result(2, message_of(20));
  EXPECT_FALSE(s.wants_more()) << "two results wait, the bound is two";
  s.on_result(0, message_of(0));
  EXPECT_EQ(take_all(s).values, (std::vector<int>{0, 10, 20}));
  EXPECT_TRUE(s.wants_more());
}

TEST_F(pool_sinks, the_stream_ends_once_finished_and_nothing_waits) {
  auto s = make(true);
  s.on_result(1, message_of(10));
  s.on_finished();
  EXPECT_FALSE(take_all(s).ended) << "item 1 waits for item 0";
  s.on_result(0, message_of(0));
  auto t = take_all(s);
  EXPECT_EQ(t.values, (std::vector<int>{0, 10}));
  EXPECT_TRUE(t.ended);
}

}  // namespace
