// FIBER_CO_TEST: a gtest whose body is a coroutine, as folly's CO_TEST. The body runs on an
// io_context of the test's own, with a fiber::context `ctx` driven by that loop (the way a service
// embeds fiber), so every `co_await` goes through the awaitable API and no thread hands the loop
// over. The test ends when the body has finished; what it throws fails the test.
//
//   FIBER_CO_TEST(simple_queue, awaitable_round_trip) {
//     fiber::simple_queue<int> q(ctx);
//     co_await q.put(1);
//     EXPECT_EQ(co_await q.get(), 1);
//   }
//
// ASSERT_* cannot be used in the body (they `return`, a coroutine must `co_return`): use EXPECT_*,
// or `if (!cond) { ADD_FAILURE() << ...; co_return; }`.
#pragma once
#include <fiber/fiber.hpp>
#include <gtest/gtest.h>

#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <exception>

namespace fiber_test {

template <class Body>
void run_coroutine(Body body) {
  asio::io_context io;
  fiber::context ctx(io);
  bool finished = false;
  std::exception_ptr failure;
  asio::co_spawn(io, body(ctx), [&](std::exception_ptr e) {
    finished = true;
    failure = e;
    ctx.stop();  // fiber's sockets no longer keep the io_context busy
  });
  io.run();
  EXPECT_TRUE(finished) << "the test's coroutine never finished";
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "the test's coroutine threw: " << e.what();
    } catch (...) {
      ADD_FAILURE() << "the test's coroutine threw something not derived from std::exception";
    }
  }
}

}  // namespace fiber_test

#define FIBER_CO_TEST(suite, name)                                                            \
  static asio::awaitable<void> suite##_##name##_co_body(fiber::context& ctx);                 \
  TEST(suite, name) { ::fiber_test::run_coroutine(&suite##_##name##_co_body); }               \
  static asio::awaitable<void> suite##_##name##_co_body([[maybe_unused]] fiber::context& ctx)
