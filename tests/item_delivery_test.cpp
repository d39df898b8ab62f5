// The pool's item delivery on its own: results and errors reach their sink at their positions, a
// call finishes once its input ran out and nothing it produced is outstanding, a call that has its
// answer is named to its owner, and a task's items fail one by one.
#include "primitives/pool/item_delivery.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "pool_test_sinks.hpp"
#include "transport/message_frames.hpp"

namespace {
using namespace fiber::detail;
using fiber_test::answering_sink;
using fiber_test::counting_sink;
using fiber_test::submission_of;

message int_message(int v) {
  fiber::writer w;
  w.value(v);
  multipart parts;
  parts.emplace_back(w.head().data(), w.head().size());
  return message(message::frames::whole(std::move(parts)));
}

std::exception_ptr closed() { return std::make_exception_ptr(fiber::error(fiber::errc::closed, "closed")); }

TEST(pool_item_delivery, items_reach_their_positions_and_the_call_finishes_when_its_input_ran_out_and_all_came) {
  int answered = 0;
  item_delivery d([&](pool_submission&) { ++answered; });
  auto sink = std::make_shared<counting_sink>(3);
  auto sub = submission_of(sink, 1);
  sub->outstanding = 3;
  d.result(*sub, 2, int_message(20));
  d.error(*sub, 0, closed());
  sub->input_done = true;
  EXPECT_EQ(sink->finished, 0);  // one outstanding
  d.result(*sub, 1, int_message(10));
  EXPECT_EQ(sink->results, (std::map<std::size_t, int>{{1, 10}, {2, 20}}));
  EXPECT_EQ(sink->errors.at(0), fiber::errc::closed);
  EXPECT_EQ(sink->finished, 1);
  EXPECT_EQ(d.done(), 3u);
  EXPECT_EQ(answered, 0);  // a counting sink never has its answer early
}

TEST(pool_item_delivery, a_call_that_has_its_answer_is_named_once_and_hears_nothing_after_it_finished) {
  std::vector<pool_submission*> named;
  item_delivery d([&](pool_submission& s) {
    named.push_back(&s);
    s.input_done = true;  // as the owner does: its input read no further
  });
  auto sink = std::make_shared<answering_sink>();
  auto sub = std::make_shared<pool_submission>(pool_submission{7, 1, sink, true, {}});
  sub->outstanding = 1;
  d.error(*sub, 0, closed());
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0], sub.get());
  EXPECT_EQ(sink->finished, 1);
  sub->outstanding = 1;  // a late one, from a task that was in flight
  d.error(*sub, 1, closed());
  EXPECT_EQ(sink->failed.size(), 1u);
  EXPECT_EQ(named.size(), 1u);
}

TEST(pool_item_delivery, a_tasks_items_fail_one_by_one_from_its_first_not_delivered) {
  item_delivery d([](pool_submission&) {});
  auto sink = std::make_shared<counting_sink>(10);
  pool_task t;
  t.sub = submission_of(sink, 4);
  t.sub->outstanding = 4;
  t.first = 4;
  t.begin = 1;
  t.end = 4;
  EXPECT_TRUE(d.fail_first(t, closed()));
  EXPECT_EQ(sink->errors.count(5), 1u);
  d.fail_items(t, closed());
  EXPECT_EQ(t.count(), 0u);
  EXPECT_EQ(sink->errors.size(), 3u);  // 5, 6, 7
  EXPECT_EQ(sink->errors.count(7), 1u);
  EXPECT_EQ(d.done(), 3u);
}

}  // namespace
