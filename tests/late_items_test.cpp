// Which of a pool's workers ran an item past its deadline, on its own, with workers and a task
// queue made here: an item's deadline is its start plus its call's timeout; a worker that holds
// nothing, is leaving, or runs an item of a call without a timeout has none; the scan names the
// late and the next deadline after now. (Ending the late workers is the pool's task_timeout
// tests', with processes.)
#include "primitives/pool/late_items.hpp"

#include <gtest/gtest.h>

#include "pool_test_sinks.hpp"

namespace {
using namespace fiber::detail;
using fiber_test::counting_sink;
using fiber_test::submission_of;
using clock_type = late_items::clock;

struct pool_late_items : ::testing::Test {
  task_queue q;
  clock_type::time_point t0 = clock_type::time_point(std::chrono::seconds(100));

  /// A worker running the next task of a call with `timeout`, since `since`.
  pool_worker running(const std::string& rid, std::chrono::milliseconds timeout, clock_type::time_point since) {
    auto sub = submission_of(std::make_shared<counting_sink>(1), 1);  // one item: its task is the next
    sub->timeout = timeout;
    q.feeder().add(sub);
    q.feed(1, std::size_t(1) << 40);
    auto t = q.take_next();
    pool_worker w;
    w.rid = rid;
    w.tasks.push_back(t.id);
    w.running_since = since;
    q.sent(std::move(t), rid);
    return w;
  }
};

TEST_F(pool_late_items, an_items_deadline_is_its_start_plus_its_calls_timeout) {
  auto w = running("a", std::chrono::milliseconds(500), t0);
  EXPECT_EQ(late_items::deadline_of(w, q), t0 + std::chrono::milliseconds(500));
  auto untimed = running("b", std::chrono::milliseconds(0), t0);
  EXPECT_FALSE(late_items::deadline_of(untimed, q));
  auto leaving = running("c", std::chrono::milliseconds(500), t0);
  leaving.leaving = true;
  EXPECT_FALSE(late_items::deadline_of(leaving, q));
  pool_worker idle;
  EXPECT_FALSE(late_items::deadline_of(idle, q));
}

TEST_F(pool_late_items, the_scan_names_the_late_and_the_next_deadline) {
  auto late = running("a", std::chrono::milliseconds(100), t0);
  auto soon = running("b", std::chrono::milliseconds(900), t0);
  auto later = running("c", std::chrono::milliseconds(2000), t0);
  auto now = t0 + std::chrono::milliseconds(500);
  auto due = late_items::scan({&later, &late, &soon}, q, now);
  ASSERT_EQ(due.late.size(), 1u);
  EXPECT_EQ(due.late[0], &late);
  EXPECT_EQ(due.next, t0 + std::chrono::milliseconds(900));
  auto none = late_items::scan({}, q, now);
  EXPECT_TRUE(none.late.empty());
  EXPECT_FALSE(none.next);
}

}  // namespace
