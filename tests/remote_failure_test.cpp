// The one form in which a child reports a failure instead of a result (process end, pool item,
// manager reply).
#include <gtest/gtest.h>

#include <stdexcept>

#include "core/remote_failure.hpp"

using fiber::detail::remote_failure;

TEST(remote_failure, a_raised_exception_round_trips_with_its_type_message_and_place) {
  remote_failure f;
  try {
    throw std::invalid_argument(std::string("bad\0value", 9));
  } catch (...) {
    f = remote_failure::of_current_exception("Worker-1");
  }
  auto back = remote_failure::decode(f.encode());
  EXPECT_FALSE(back.in_fiber);
  EXPECT_EQ(back.type, "std::invalid_argument");
  EXPECT_EQ(back.where, "Worker-1");
  try {
    std::rethrow_exception(back.exception());
  } catch (const fiber::remote_error& e) {
    EXPECT_EQ(e.type(), "std::invalid_argument");
    EXPECT_EQ(e.where(), "Worker-1");
  }
}

TEST(remote_failure, fibers_own_error_keeps_its_code_and_names_where) {
  auto back = remote_failure::decode(remote_failure::fiber_error(fiber::errc::message_too_large, "too big", "W").encode());
  EXPECT_TRUE(back.in_fiber);
  try {
    std::rethrow_exception(back.exception());
  } catch (const fiber::error& e) {
    EXPECT_EQ(e.code(), fiber::errc::message_too_large);
    EXPECT_STREQ(e.what(), fiber::error(fiber::errc::message_too_large, "too big (in W)").what());
  }
}

TEST(remote_failure, something_that_is_not_a_failure_reads_as_a_protocol_error) {
  for (std::string_view junk : {std::string_view(""), std::string_view("type only"),
                                std::string_view("x\0a\0b\0c", 7), std::string_view("f\0notanumber\0m\0w", 16)}) {
    auto f = remote_failure::decode(junk);
    EXPECT_TRUE(f.in_fiber);
    EXPECT_EQ(f.code, static_cast<int>(fiber::errc::protocol_error));
  }
}

TEST(remote_failure, an_exception_not_from_std_exception_is_named_so) {
  remote_failure f;
  try {
    throw 42;
  } catch (...) {
    f = remote_failure::of_current_exception();
  }
  EXPECT_EQ(f.type, "unknown");
  EXPECT_NE(f.message.find("not derived from std::exception"), std::string::npos);
}
