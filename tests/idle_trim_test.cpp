// runtime/idle_trim on an io_context of the test's own: it trims once nothing has been busy for
// its delay, not while a hold is alive, not when work came back before the delay, and never with
// a delay of 0. io_context::run() returns once the timer's wait is done: no sleep.
#include "runtime/idle_trim.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

using namespace std::chrono_literals;
using fiber::detail::idle_trim;

TEST(idle_trim, it_trims_once_the_last_hold_is_dropped_and_the_delay_passed) {
  asio::io_context io;
  int trimmed = 0;
  idle_trim trim(io, 1ms, [&] { ++trimmed; });
  {
    auto a = trim.busy();
    auto b = trim.busy();
    { auto drop = std::move(a); }
    io.run();  // one hold left: nothing armed
    io.restart();
    EXPECT_EQ(trimmed, 0);
  }
  io.run();  // the last went: armed, and fired
  EXPECT_EQ(trimmed, 1);
  EXPECT_EQ(trim.trims(), 1u);
}

TEST(idle_trim, work_that_comes_back_within_the_delay_keeps_the_memory) {
  asio::io_context io;
  int trimmed = 0;
  idle_trim trim(io, 1ms, [&] { ++trimmed; });
  { auto first = trim.busy(); }  // idle: armed
  auto again = trim.busy();      // busy again before the delay
  io.run();  // the timer finds work under way: no trim, and nothing armed after
  EXPECT_EQ(trimmed, 0);
  { auto done = std::move(again); }
  io.restart();
  io.run();  // idle again: armed anew, and fired
  EXPECT_EQ(trimmed, 1);
}

TEST(idle_trim, once_stopped_it_trims_no_more_and_holds_no_timer) {
  asio::io_context io;
  int trimmed = 0;
  idle_trim trim(io, 1h, [&] { ++trimmed; });
  { auto h = trim.busy(); }  // armed for an hour
  trim.stop();
  io.run();  // returns: the wait was cancelled
  EXPECT_EQ(trimmed, 0);
  EXPECT_FALSE(trim.busy()) << "a stopped trimmer counts nothing";
}

TEST(idle_trim, a_hold_dropped_on_another_thread_arms_it_on_the_loop) {
  asio::io_context io;
  int trimmed = 0;
  idle_trim trim(io, 1ms, [&] { ++trimmed; });
  auto h = trim.busy();
  std::thread([h = std::move(h)]() mutable { auto gone = std::move(h); }).join();
  io.run();
  EXPECT_EQ(trimmed, 1);
}

TEST(idle_trim, a_delay_of_zero_never_trims) {
  asio::io_context io;
  int trimmed = 0;
  idle_trim trim(io, 0ms, [&] { ++trimmed; });
  { auto h = trim.busy(); }
  io.run();
  EXPECT_EQ(trimmed, 0);
}

TEST(idle_trim, holds_that_outlive_it_do_nothing) {
  asio::io_context io;
  idle_trim::hold late;
  {
    idle_trim trim(io, 1ms, [] {});
    late = trim.busy();
  }
  { auto gone = std::move(late); }
  io.run();
  SUCCEED() << "no handler touched the trimmer that went first";
}
