// Shared test helpers.
#pragma once
#include <fiber/error.hpp>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <string_view>

#include "proc_children.hpp"

namespace fiber_test {
/// Runs `f`, which must throw fiber::error with `code` and a message containing each of `mentions`.
template <class F>
void expect_error(F&& f, fiber::errc code, std::initializer_list<std::string_view> mentions) {
  try {
    f();
    ADD_FAILURE() << "expected fiber::error " << fiber::make_error_code(code).message();
  } catch (const fiber::error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (auto m : mentions) EXPECT_NE(std::string_view(e.what()).find(m), std::string_view::npos) << e.what();
  }
}
template <class F>
void expect_error(F&& f, fiber::errc code, std::string_view mentions = "") {
  expect_error(std::forward<F>(f), code, {mentions});
}
}  // namespace fiber_test
