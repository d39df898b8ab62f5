// How a child's start completes, on its own, on a real io_context: once, with the first outcome;
// the deadline fires only while the start is waiting, and completing cancels it.
#include "primitives/child_start_gate.hpp"

#include <gtest/gtest.h>

#include <asio/io_context.hpp>

#include "fiber/error.hpp"

namespace {
using fiber::detail::child_start_gate;

TEST(child_start_gate, the_start_completes_once_with_the_first_outcome) {
  child_start_gate g;
  int calls = 0;
  std::error_code got;
  g.open([&](std::error_code ec, std::string) {
    ++calls;
    got = ec;
  });
  EXPECT_TRUE(g.waiting());
  g.complete({}, {});
  g.complete(make_error_code(fiber::errc::timeout), "late");
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(got);
  EXPECT_FALSE(g.waiting());
}

TEST(child_start_gate, completing_cancels_the_deadline) {
  asio::io_context io;
  child_start_gate g;
  g.open([](std::error_code, std::string) {});
  std::error_code fired_with;
  bool fired = false;
  g.arm(io, std::chrono::hours(1), [&](std::error_code ec) {
    fired = true;
    fired_with = ec;
  });
  g.complete({}, {});
  io.run();  // returns at once: the hour's timer was cancelled
  EXPECT_TRUE(fired);
  EXPECT_EQ(fired_with, asio::error::operation_aborted);
}

TEST(child_start_gate, a_deadline_fires_while_waiting_and_none_is_armed_after_the_start) {
  asio::io_context io;
  child_start_gate g;
  std::string why;
  g.open([&](std::error_code, std::string detail) { why = detail; });
  g.arm(io, std::chrono::milliseconds(0), [&](std::error_code ec) {
    if (!ec && g.waiting()) g.complete(make_error_code(fiber::errc::timeout), "no handshake");
  });
  io.run();
  EXPECT_EQ(why, "no handshake");
  bool armed_late = false;
  g.arm(io, std::chrono::milliseconds(0), [&](std::error_code) { armed_late = true; });
  io.restart();
  io.run();
  EXPECT_FALSE(armed_late);
}

}  // namespace
