// What the dashboard shows of a pool's failures, on its own: the newest twenty, oldest first,
// each with its time since the pool began.
#include "primitives/pool/pool_view.hpp"

#include <gtest/gtest.h>

#include <string>

TEST(pool_view, the_newest_failures_are_kept_oldest_first_with_their_time) {
  fiber::detail::pool_view view;
  for (int i = 0; i < 25; ++i) view.note_failure("failure " + std::to_string(i));
  auto failures = view.failures();
  ASSERT_EQ(failures.size(), fiber::detail::pool_view::failures_kept);
  EXPECT_EQ(failures.front().at("what").as_string(), "failure 5");
  EXPECT_EQ(failures.back().at("what").as_string(), "failure 24");
  double before = 0;
  for (auto& f : failures) {
    auto at = f.at("at_s").as_double();
    EXPECT_GE(at, before) << "in the order they came";
    before = at;
  }
}
