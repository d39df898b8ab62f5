// fiber::op (fiber/op.hpp) and detail::deferred_op, the one way fiber makes an op: lazy until
// awaited or waited for, its errors, where it resumes, and what blocking on the loop means.
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/strand.hpp>
#include <fiber/fiber.hpp>
#include <fiber/detail/completion.hpp>
#include <gtest/gtest.h>

#include <future>
#include <thread>
#include <variant>

#include "co_test.hpp"
#include "support.hpp"

namespace {
using fiber::detail::completion;

/// An op whose start counts its runs and completes at once with `value`.
fiber::op<int> counted(fiber::context& ctx, std::shared_ptr<int> starts, int value) {
  return fiber::detail::deferred_op<int>(ctx.runtime(), [starts, value] {
    ++*starts;
    auto c = std::make_shared<completion<int>>();
    c->set_value(value);
    return c;
  });
}
}  // namespace

TEST(op, nothing_starts_until_it_is_waited_for) {
  fiber::context ctx;
  auto starts = std::make_shared<int>(0);
  auto o = counted(ctx, starts, 42);
  EXPECT_EQ(*starts, 0);
  EXPECT_EQ(std::move(o).get(), 42);
  EXPECT_EQ(*starts, 1);
  { auto dropped = counted(ctx, starts, 1); }
  EXPECT_EQ(*starts, 1) << "an op never awaited never starts";
}

TEST(op, what_its_start_throws_is_its_error_both_ways) {
  fiber::context ctx;
  auto failing = [&] {
    return fiber::detail::deferred_op<void>(ctx.runtime(), []() -> std::shared_ptr<completion<std::monostate>> {
      throw fiber::error(fiber::errc::closed, "refused at start");
    });
  };
  fiber_test::expect_error([&] { failing().get(); }, fiber::errc::closed, {"refused at start"});
  std::promise<std::error_code> seen;
  asio::co_spawn(ctx.get_executor(), [&]() -> asio::awaitable<void> {
    try {
      co_await failing();
      seen.set_value({});
    } catch (const fiber::error& e) {
      seen.set_value(e.code());
    }
  }, asio::detached);
  EXPECT_EQ(seen.get_future().get(), fiber::errc::closed);
}

TEST(op, its_finishing_step_runs_on_the_thread_that_waits) {
  fiber::context ctx;
  std::thread::id finished_on;
  auto o = fiber::detail::deferred_op<int>(
      ctx.runtime(),
      [] {
        auto c = std::make_shared<completion<int>>();
        c->set_value(20);
        return c;
      },
      [&](int v) {
        finished_on = std::this_thread::get_id();
        return v + 1;
      });
  EXPECT_EQ(std::move(o).get(), 21);
  EXPECT_EQ(finished_on, std::this_thread::get_id());
}

TEST(op, a_completion_finished_later_on_the_loop_wakes_the_waiting_thread) {
  fiber::context ctx;
  auto o = fiber::detail::deferred_op<std::string>(ctx.runtime(), [ex = ctx.get_executor()] {
    auto c = std::make_shared<completion<std::string>>();
    asio::post(ex, [c] { c->set_value("later"); });  // not done when start returns
    return c;
  });
  EXPECT_EQ(std::move(o).get(), "later");
}

TEST(op, a_callback_op_arms_when_waited_for_and_completes_or_fails_when_called_back) {
  fiber::context ctx;
  auto ex = ctx.get_executor();
  int armed = 0;
  auto later = [&](bool fail) {
    return fiber::detail::callback_op(ctx.runtime(), [&armed, ex, fail](fiber::detail::done_callback done) {
      ++armed;
      asio::post(ex, [done, fail] {
        if (fail)
          done(std::make_exception_ptr(fiber::error(fiber::errc::closed, "the core gave up")));
        else
          done();
      });
    });
  };
  auto ok = later(false);
  EXPECT_EQ(armed, 0);  // lazy, as every op
  std::move(ok).get();
  EXPECT_EQ(armed, 1);
  EXPECT_THROW(std::move(later(true)).get(), fiber::error);
  auto refused = fiber::detail::callback_op(ctx.runtime(), [](fiber::detail::done_callback) {
    throw fiber::error(fiber::errc::not_started, "not yet");
  });
  EXPECT_THROW(std::move(refused).get(), fiber::error);  // what arm throws is the op's error
}

// A lazy operation dropped before it started never runs; the log says so, naming what made it.
// One that was waited for, one moved into another, and work already under way say nothing.
TEST(op, one_dropped_before_it_started_is_reported_by_name) {
  fiber::context ctx;
  auto starts = std::make_shared<int>(0);
  testing::internal::CaptureStderr();
  { auto dropped = counted(ctx, starts, 1); }
  auto said = testing::internal::GetCapturedStderr();
  EXPECT_EQ(*starts, 0);
  EXPECT_NE(said.find("counted"), std::string::npos) << said;
  EXPECT_NE(said.find("dropped before it was awaited or waited for"), std::string::npos) << said;

  testing::internal::CaptureStderr();
  {
    auto waited = counted(ctx, starts, 2);
    EXPECT_EQ(std::move(waited).get(), 2);
    auto moved = counted(ctx, starts, 3);
    auto into = std::move(moved);
    EXPECT_EQ(std::move(into).get(), 3);
    auto c = std::make_shared<completion<int>>();
    c->set_value(4);
    auto under_way = fiber::detail::completion_op(ctx.runtime(), c);  // dropped, but not lazy
  }
  said = testing::internal::GetCapturedStderr();
  EXPECT_EQ(said.find("dropped"), std::string::npos) << said;
}

FIBER_CO_TEST(op, awaited_from_another_executor_it_resumes_there) {
  // The test's coroutine runs on its io_context; fiber's loop here is the same one. Await from a
  // strand of it: the op runs on fiber's executor and the coroutine comes back to its own.
  auto strand = asio::make_strand(co_await asio::this_coro::executor);
  auto resumed_in_strand = co_await asio::co_spawn(
      strand,
      [&]() -> asio::awaitable<bool> {
        auto starts = std::make_shared<int>(0);
        EXPECT_EQ(co_await counted(ctx, starts, 5), 5);
        co_return strand.running_in_this_thread();
      },
      asio::use_awaitable);
  EXPECT_TRUE(resumed_in_strand);
}

TEST(op, blocking_get_on_the_loop_thread_is_refused) {
  asio::io_context io;
  fiber::context ctx(io);
  std::error_code seen;
  asio::post(io, [&] {
    fiber::simple_queue<int> q(ctx);
    try {
      (void)q.get().get();
    } catch (const fiber::error& e) {
      seen = e.code();
    }
  });
  io.run();
  EXPECT_EQ(seen, fiber::errc::would_deadlock);
}

// An error's reason is its what() without the code's words std::system_error appends, so an
// error that wraps another says them once.
TEST(op, an_errors_reason_leaves_out_the_codes_words) {
  fiber::error e(fiber::errc::unsatisfiable, "Process-1 asks for 3 GPUs");
  EXPECT_EQ(std::string(e.what()), "Process-1 asks for 3 GPUs: no node can satisfy the request");
  EXPECT_EQ(e.reason(), "Process-1 asks for 3 GPUs");
  fiber::error wrapped(e.code(), "pool workers cannot start: " + e.reason());
  EXPECT_EQ(std::string(wrapped.what()), "pool workers cannot start: Process-1 asks for 3 GPUs: no node can satisfy the request");
}
