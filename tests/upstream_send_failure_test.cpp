// What a worker says when its master cannot be reached: a master that is gone once, at INFO,
// however many sends fail after; any other failure, an error each time.
#include "runtime/upstream_send_failure.hpp"

#include <gtest/gtest.h>

namespace {
using fiber::log_level;
using fiber::detail::upstream_send_failure;
}  // namespace

TEST(upstream_send_failure, a_master_that_is_gone_is_said_once_at_info) {
  upstream_send_failure f;
  auto [level, text] = f.report(std::make_error_code(std::errc::broken_pipe));
  EXPECT_EQ(level, log_level::info);
  EXPECT_NE(text.find("the master is gone"), std::string::npos) << text;
  for (auto e : {std::errc::broken_pipe, std::errc::connection_reset, std::errc::broken_pipe})
    EXPECT_TRUE(f.report(std::make_error_code(e)).second.empty()) << "said again";
}

TEST(upstream_send_failure, another_failure_is_an_error_each_time) {
  upstream_send_failure f;
  for (int i = 0; i < 2; ++i) {
    auto [level, text] = f.report(std::make_error_code(std::errc::message_size));
    EXPECT_EQ(level, log_level::error);
    EXPECT_NE(text.find("cannot send to the master"), std::string::npos) << text;
  }
}
