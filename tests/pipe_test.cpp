// fiber::pipe and fiber::connection (fiber/pipe.hpp) between real processes: duplex and
// one-way, blocking and awaited.
#include <fiber/fiber.hpp>
#include <gtest/gtest.h>

#include "co_test.hpp"
#include "support.hpp"

namespace {
void echo_pipe(fiber::connection<std::string> end, int count) {
  for (int i = 0; i < count; ++i) end.send("echo " + end.recv().get()).get();
}
void send_one_way(fiber::connection<std::vector<double>> end) { end.send(std::vector<double>(3, 1.5)).get(); }
}  // namespace
FIBER_REMOTE(echo_pipe);
FIBER_REMOTE(send_one_way);

TEST(pipe, duplex_both_ways_with_a_child) {
  auto [mine, theirs] = fiber::pipe<std::string>();
  fiber::process p(&echo_pipe, theirs, 3);
  p.start().get();
  for (int i = 0; i < 3; ++i) {
    mine.send("hi " + std::to_string(i)).get();
    EXPECT_EQ(mine.recv().get(), "echo hi " + std::to_string(i));
  }
  p.join().get();
}

TEST(pipe, one_way_from_a_child) {
  auto [reader, writer] = fiber::pipe<std::vector<double>>(false);
  EXPECT_FALSE(reader.can_send());
  EXPECT_FALSE(writer.can_recv());
  fiber::process p(&send_one_way, writer);
  p.start().get();
  EXPECT_EQ(reader.recv().get(), std::vector<double>(3, 1.5));
  p.join().get();
}

TEST(pipe, wrong_direction_is_an_error) {
  auto [reader, writer] = fiber::pipe<int>(false);
  fiber_test::expect_error([&] { (void)reader.send(1); }, fiber::errc::wrong_direction);
  EXPECT_THROW((void)writer.recv(), fiber::error);
}

TEST(pipe, recv_with_timeout) {
  auto [a, b] = fiber::pipe<int>();
  EXPECT_EQ(a.recv(std::chrono::milliseconds(1)).get(), std::nullopt);
  b.send(9).get();
  EXPECT_EQ(a.recv(std::chrono::milliseconds(1)).get(), 9);
}

FIBER_CO_TEST(pipe, awaitable_send_and_recv_with_a_child) {
  auto [here, there] = fiber::pipe<std::string>(ctx);
  fiber::process p(ctx, &echo_pipe, there, 2);
  co_await p.start();
  co_await here.send("ping");
  EXPECT_EQ(co_await here.recv(), "echo ping");
  co_await here.send(std::string(100000, 'x'));  // a large message, its own frame
  EXPECT_EQ((co_await here.recv()).size(), 100005u);
  co_await p.join();
  EXPECT_EQ(p.exitcode(), 0);
}
