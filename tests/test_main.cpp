// main() of every test binary: fiber::init first (workers re-execute this binary), and a
// listener that fails any test that leaves a child process behind.
#include <fiber/fiber.hpp>
#include <gtest/gtest.h>

#include "support.hpp"

namespace {
class no_leftover_children : public ::testing::EmptyTestEventListener {
  void OnTestEnd(const ::testing::TestInfo& info) override {
    auto left = fiber_test::child_pids();
    if (!left.empty()) {
      std::string pids;
      for (int p : left) pids += " " + std::to_string(p);
      ADD_FAILURE() << info.test_suite_name() << "." << info.name() << " left child processes behind:" << pids;
    }
  }
};
}  // namespace

int main(int argc, char** argv) {
  fiber::init(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::UnitTest::GetInstance()->listeners().Append(new no_leftover_children);
  return RUN_ALL_TESTS();
}
