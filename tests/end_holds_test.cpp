// What a context waits for before it ends, on its own: a held child is waited for until it is let
// go, and the wait does not block where nobody could run the loop meanwhile.
#include "runtime/end_holds.hpp"

#include <gtest/gtest.h>

#include <thread>

namespace {
using fiber::detail::end_holds;
using fiber::detail::event_loop;

TEST(end_holds, the_wait_runs_the_loop_until_the_last_hold_is_let_go) {
  event_loop loop(nullptr, /*standby=*/true);  // a master's: fiber owns the loop
  end_holds holds(loop);
  std::uint64_t first = 0, second = 0;
  loop.run_sync([&] {
    first = holds.hold(std::make_shared<int>(1), "Process-1");
    second = holds.hold(std::make_shared<int>(2), "Process-2");
  });
  EXPECT_EQ(holds.held(), 2u);
  // Each let-go arrives from another thread, through the loop the wait itself runs.
  std::thread children([&] {
    loop.run_sync([&] { holds.let_go(first); });
    loop.run_sync([&] { holds.let_go(second); });
  });
  holds.wait();
  EXPECT_EQ(holds.held(), 0u);
  children.join();
}

TEST(end_holds, nothing_held_is_no_wait_and_the_loops_own_thread_does_not_wait_for_itself) {
  event_loop loop(nullptr, /*standby=*/true);
  end_holds holds(loop);
  holds.wait();  // nothing held
  loop.run_sync([&] {
    holds.hold(std::make_shared<int>(1), "Process-1");
    holds.wait();  // on the loop's thread: returns, and the child ends with the context
  });
  EXPECT_EQ(holds.held(), 1u);
}

TEST(end_holds, with_a_callers_io_context_nothing_is_waited_for) {
  asio::io_context io;
  event_loop loop(&io, /*standby=*/false);
  end_holds holds(loop);
  holds.hold(std::make_shared<int>(1), "Process-1");
  holds.wait();  // only the caller can run its io_context
  EXPECT_EQ(holds.held(), 1u);
}

}  // namespace
