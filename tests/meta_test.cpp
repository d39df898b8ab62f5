// fiber::meta and FIBER_META (fiber/meta.hpp): what a function needs, found by its function.
#include <fiber/meta.hpp>
#include <fiber/registry.hpp>
#include <gtest/gtest.h>

namespace sample {
int add(int a, int b) { return a + b; }
std::string shout(const std::string& s) { return s + "!"; }
}  // namespace sample
// Declared before its FIBER_REMOTE: the order of the two macros does not matter.
FIBER_META(sample::shout, .cpu = 2, .gpu = 1);
FIBER_REMOTE(sample::add);
FIBER_REMOTE(sample::shout);

int not_registered_function(int x) { return x; }

TEST(meta, meta_is_found_for_its_function_only) {
  EXPECT_EQ(fiber::meta_of(&sample::shout), (fiber::meta{.cpu = 2, .memory_mb = 0, .gpu = 1}));
  EXPECT_EQ(fiber::meta_of(&sample::add), fiber::meta{});
  EXPECT_EQ(fiber::meta_of(&not_registered_function), fiber::meta{});
}

TEST(meta, meta_covers_and_joins) {
  fiber::meta small{.cpu = 1, .memory_mb = 100}, gpu{.gpu = 1};
  EXPECT_TRUE(small.covers(fiber::meta{}));
  EXPECT_FALSE(small.covers(gpu));
  auto both = small.joined(gpu);
  EXPECT_EQ(both, (fiber::meta{.cpu = 1, .memory_mb = 100, .gpu = 1}));
  EXPECT_TRUE(both.covers(small));
  EXPECT_TRUE(both.covers(gpu));
}
