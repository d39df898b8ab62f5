// The pool's deadlines on their own, on a real io_context, without a process: nothing is
// watched until a submission uses them, the earliest deadline fires (a later one does not push
// it back), and what the due says comes next is watched in turn.
#include "primitives/pool/item_deadlines.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace {
using fiber::detail::item_deadlines;
using clock_type = item_deadlines::clock;

/// Deadlines whose due counts its calls and names no next one.
struct counting_deadlines {
  asio::io_context io;
  int due = 0;
  item_deadlines d{io, [this]() -> std::optional<clock_type::time_point> {
                     ++due;
                     return std::nullopt;
                   }};
};
}  // namespace

TEST(item_deadlines, nothing_is_watched_before_a_submission_uses_them) {
  counting_deadlines c;
  auto& [io, due, d] = c;
  d.watch(clock_type::now() - std::chrono::seconds(1));
  EXPECT_FALSE(d.used());
  io.run();  // no timer: returns at once
  EXPECT_EQ(due, 0);
}

TEST(item_deadlines, a_later_deadline_does_not_push_back_an_earlier_one) {
  counting_deadlines c;
  auto& [io, due, d] = c;
  d.use();
  d.watch(clock_type::now() - std::chrono::seconds(1));  // passed already
  d.watch(clock_type::now() + std::chrono::hours(1));
  io.run_one();  // the one passed fires; had the later replaced it, this would wait an hour
  EXPECT_EQ(due, 1);
}

TEST(item_deadlines, the_next_deadline_the_due_names_is_watched) {
  asio::io_context io;
  std::vector<int> calls;
  item_deadlines d(io, [&]() -> std::optional<clock_type::time_point> {
    calls.push_back(static_cast<int>(calls.size()));
    if (calls.size() < 3) return clock_type::now() - std::chrono::milliseconds(1);  // late already
    return std::nullopt;
  });
  d.use();
  d.watch(clock_type::now() - std::chrono::seconds(1));
  io.run();  // three dues, then nothing left to wait for
  EXPECT_EQ(calls.size(), 3u);
}

TEST(item_deadlines, cancelled_they_do_not_fire) {
  counting_deadlines c;
  auto& [io, due, d] = c;
  d.use();
  d.watch(clock_type::now() - std::chrono::seconds(1));
  d.cancel();
  io.run();
  EXPECT_EQ(due, 0);
}
