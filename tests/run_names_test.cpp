// How the fiber command names runs (src/cli/run_names): unit tests.
#include "cli/run_names.hpp"

#include <gtest/gtest.h>

#include "fiber/error.hpp"

using namespace fiber::cli;

TEST(run_names, a_default_name_is_the_programs_cleaned_name_and_six_hex_digits) {
  auto name = default_run_name("/work/build/examples/Pi_Estimation");
  ASSERT_EQ(name.size(), std::string("pi-estimation-").size() + 6) << name;
  EXPECT_TRUE(name.starts_with("pi-estimation-")) << name;
  EXPECT_EQ(name.find_first_not_of("0123456789abcdef", 14), std::string::npos) << name;
  EXPECT_NO_THROW(check_run_name(name));
  EXPECT_EQ(sanitized_name("__"), "fiber");
}

TEST(run_names, an_unusable_name_is_refused_with_the_rule) {
  for (const std::string& bad : {std::string(), std::string("-x"), std::string("a b"), std::string("a_b"), std::string(64, 'a')}) {
    try {
      check_run_name(bad);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const fiber::error& e) {
      EXPECT_NE(std::string(e.what()).find("up to 63 letters, digits and '-'"), std::string::npos) << e.what();
    }
  }
  EXPECT_NO_THROW(check_run_name("run-1"));
}
