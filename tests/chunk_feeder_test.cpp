// The pool's chunk feeder on its own, without a process or a queue's flight: chunks made in the
// order the calls came, within the window, growing when asked, over the message limit failed
// without being queued, and a call taken out or dropped read no further.
#include "primitives/pool/chunk_feeder.hpp"

#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <vector>

#include "pool_test_sinks.hpp"

namespace {
using namespace fiber::detail;
using fiber_test::answering_sink;
using fiber_test::counting_sink;
using fiber_test::submission_of;

constexpr std::size_t no_limit = std::size_t(1) << 40;

/// A feeder whose answered calls are dropped, as the queue drops them.
struct pool_chunk_feeder : ::testing::Test {
  std::vector<pool_submission*> answered;
  item_delivery delivery{[this](pool_submission& s) {
    answered.push_back(&s);
    feeder.drop(s);
  }};
  chunk_feeder feeder{delivery};
  std::deque<pool_task> queue;
  std::uint64_t next_id = 1;
};

TEST_F(pool_chunk_feeder, chunks_come_from_the_first_call_until_its_input_runs_out_then_from_the_next) {
  auto first = std::make_shared<counting_sink>(5);
  auto second = std::make_shared<counting_sink>(4);
  feeder.add(submission_of(first, 2));
  feeder.add(submission_of(second, 2));
  feeder.feed(queue, 3, no_limit, next_id);
  ASSERT_EQ(queue.size(), 3u);  // the window
  EXPECT_EQ(queue[0].sub->sink.get(), first.get());
  EXPECT_EQ(queue[2].sub->sink.get(), first.get());
  EXPECT_EQ(queue[2].count(), 1u);  // 2 + 2 + 1
  EXPECT_EQ(queue[2].position(), 4u);
  EXPECT_EQ(queue[2].id, 3u);
  feeder.feed(queue, 10, no_limit, next_id);
  ASSERT_EQ(queue.size(), 5u);
  EXPECT_EQ(queue[3].sub->sink.get(), second.get());
  EXPECT_EQ(queue[3].position(), 0u);
  EXPECT_EQ(next_id, 6u);
  EXPECT_FALSE(feeder.reading());  // both inputs ran out
}

TEST_F(pool_chunk_feeder, a_call_of_unknown_size_gets_chunks_that_double_up_to_its_bound) {
  auto sink = std::make_shared<counting_sink>(100);
  auto sub = submission_of(sink, 1);
  sub->grow_to = 8;
  feeder.add(sub);
  feeder.feed(queue, 6, no_limit, next_id);
  std::vector<std::size_t> sizes;
  for (auto& t : queue) sizes.push_back(t.count());
  EXPECT_EQ(sizes, (std::vector<std::size_t>{1, 2, 4, 8, 8, 8}));
}

TEST_F(pool_chunk_feeder, a_chunk_over_the_message_limit_fails_its_items_and_is_not_queued) {
  auto sink = std::make_shared<counting_sink>(4);
  feeder.add(submission_of(sink, 2));
  feeder.feed(queue, 8, 10, next_id);  // two packed ints are more than 10 bytes
  EXPECT_TRUE(queue.empty());
  ASSERT_EQ(sink->errors.size(), 4u);
  EXPECT_EQ(sink->errors[0], fiber::errc::message_too_large);
  EXPECT_NE(sink->reasons[0].find("use a smaller chunksize"), std::string::npos) << sink->reasons[0];
  EXPECT_EQ(sink->finished, 1);
  EXPECT_EQ(delivery.done(), 4u);
}

TEST_F(pool_chunk_feeder, a_call_answered_by_its_chunks_failure_is_named_and_the_next_call_is_fed) {
  auto failing = std::make_shared<answering_sink>();
  auto after = std::make_shared<counting_sink>(2);
  auto sub = std::make_shared<pool_submission>(pool_submission{7, 2, failing, true, {}});
  feeder.add(sub);
  feeder.add(submission_of(after, 1));
  feeder.feed(queue, 8, 20, next_id);  // two packed ints are more than 20 bytes; one is not
  ASSERT_FALSE(answered.empty());
  EXPECT_EQ(answered.front(), sub.get());
  EXPECT_EQ(failing->next, 2);  // read no further than the chunk that failed
  EXPECT_EQ(failing->finished, 1);
  EXPECT_EQ(queue.size(), 2u);  // the next call's two chunks of one
  EXPECT_FALSE(feeder.reading());
}

TEST_F(pool_chunk_feeder, calls_taken_out_are_read_no_further_and_each_is_named_once) {
  auto a = std::make_shared<counting_sink>(10);
  auto b = std::make_shared<counting_sink>(10);
  auto sub_a = submission_of(a, 1);
  feeder.add(sub_a);
  feeder.add(submission_of(b, 1));
  std::vector<std::shared_ptr<pool_submission>> taken{sub_a};
  feeder.take_where([&](const pool_submission& s) { return s.sink.get() == a.get(); }, taken);
  EXPECT_EQ(taken.size(), 1u);  // already named
  feeder.feed(queue, 3, no_limit, next_id);
  for (auto& t : queue) EXPECT_EQ(t.sub->sink.get(), b.get());
  EXPECT_EQ(a->next, 0);
  EXPECT_TRUE(feeder.reading());
}

}  // namespace
