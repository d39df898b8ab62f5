// fiber::pool's calls that end before their work: a map awaited while its context stops, and a
// map that failed, whose queued items are then of no use.
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>

#include "pool_support.hpp"

// A service stopped mid-request: context::stop() while a map is awaited on the caller's
// io_context. The map ends with errc::cancelled (it used to be left waiting for ever), its workers
// end, and io.run() returns: nothing of fiber's is left on the loop.
TEST(pool, stopping_the_context_while_a_map_is_awaited_ends_the_map_and_lets_the_loop_return) {
  asio::io_context io;
  fiber::context ctx(io);
  fiber::simple_queue<int> arrived(ctx);
  std::error_code got;
  bool resumed = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        fiber::pool p(ctx, 2);
        std::vector<std::tuple<int, fiber::simple_queue<int>>> args;
        for (int i = 0; i < 6; ++i) args.emplace_back(i, arrived);
        try {
          (void)co_await p.starmap(&arrive_and_hang, args, 1);
        } catch (const fiber::error& e) {
          got = e.code();
        }
        resumed = true;
      },
      asio::detached);
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        co_await arrived.get();  // both workers run one of its items
        co_await arrived.get();
        ctx.stop();
      },
      asio::detached);
  io.run();
  EXPECT_TRUE(resumed) << "the awaiting coroutine was never resumed";
  EXPECT_EQ(got, fiber::errc::cancelled);
}

// A map whose item raised has answered its caller: its items still queued are dropped rather
// than run for nobody. Here every other item waits on a gate the test opens only afterwards, so
// nothing but that drop can empty the queue.
TEST(pool, a_map_that_failed_drops_its_queued_items) {
  fiber::pool p(2);
  fiber::simple_queue<int> gate;
  std::vector<std::tuple<int, fiber::simple_queue<int>>> args;
  for (int i = 0; i < 40; ++i) args.emplace_back(i, gate);
  fiber_test::expect_error([&] { (void)p.starmap(&fail_zero_or_wait, args, 1).get(); }, fiber::errc::remote_error,
                           "item zero fails");
  EXPECT_EQ(p.stats().queued, 0u);  // without the drop, the items queued behind those at the gate stay
  for (int i = 0; i < 8; ++i) gate.put(0).get();  // the items already sent finish
  EXPECT_EQ(p.apply(&square, 3).get(), 9);
  EXPECT_EQ(p.stats().workers_lost, 0u);
}
