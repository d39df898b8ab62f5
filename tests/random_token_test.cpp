// Tokens for who may call (core/random_token): 128 bits from the kernel's generator, as 32
// lowercase hex digits, never the same twice.
#include "core/random_token.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

using fiber::detail::random_token;

TEST(random_token, is_thirty_two_lowercase_hex_digits) {
  for (int i = 0; i < 100; ++i) {
    auto t = random_token();
    ASSERT_EQ(t.size(), 32u) << t;
    for (char c : t) EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << t;
  }
}

TEST(random_token, a_thousand_are_all_different_and_every_digit_takes_many_values) {
  std::set<std::string> seen;
  std::set<char> at[32];
  for (int i = 0; i < 1000; ++i) {
    auto t = random_token();
    EXPECT_TRUE(seen.insert(t).second) << "the same token twice: " << t;
    for (std::size_t p = 0; p < t.size(); ++p) at[p].insert(t[p]);
  }
  // Over a thousand draws each place sees all 16 digits but with a chance of about 1e-26; a
  // place stuck on a few values (a byte left unfilled, a half-written token) shows here.
  for (std::size_t p = 0; p < 32; ++p) EXPECT_EQ(at[p].size(), 16u) << "place " << p;
}
