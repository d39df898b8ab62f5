// The guard against a program without fiber::init: a master refuses to start a child, naming the
// fix; with init called it lets it start.
#include "runtime/init_guard.hpp"

#include <gtest/gtest.h>

#include "fiber/error.hpp"
#include "support.hpp"

TEST(init_guard, a_master_whose_main_did_not_call_init_is_told_to) {
  auto& called = fiber::detail::init_was_called();
  ASSERT_TRUE(called) << "the test binary's main calls fiber::init";
  called = false;
  fiber_test::expect_error([] { fiber::detail::require_init(); }, fiber::errc::spawn_failed,
                           "make it the first line of main()");
  called = true;
  EXPECT_NO_THROW(fiber::detail::require_init());
}
