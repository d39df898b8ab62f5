// A worker's title in `ps`: written over its arguments, within the space they had, and read back
// from /proc by a real worker of a pool (what ps reads).
#include "core/process_title.hpp"

#include <fiber/fiber.hpp>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "support.hpp"

namespace {
std::string cmdline_of_this_worker(int) {
  std::ifstream in("/proc/self/cmdline");
  return std::string(std::istreambuf_iterator<char>(in), {});
}
}  // namespace
FIBER_REMOTE(cmdline_of_this_worker);

// Arguments laid out as the kernel lays them: one after the other, each ended by a NUL.
struct laid_out_arguments {
  char area[64] = {};
  char* argv[4] = {};
  int argc = 0;
  explicit laid_out_arguments(std::initializer_list<const char*> args) {
    std::memset(area, 'x', sizeof area);  // what lies after them (the environment)
    char* at = area;
    for (auto* a : args) {
      argv[argc++] = at;
      std::strcpy(at, a);
      at += std::strlen(a) + 1;
    }
  }
};

TEST(process_title, a_title_replaces_the_arguments_and_zeroes_what_is_left) {
  laid_out_arguments a({"/opt/app/prog", "--fiber-zygote"});
  EXPECT_EQ(fiber::detail::set_process_title(a.argc, a.argv, "PoolWorker-1-2 prog"), "PoolWorker-1-2 prog");
  EXPECT_STREQ(a.area, "PoolWorker-1-2 prog");
  for (std::size_t i = std::strlen("PoolWorker-1-2 prog"); i < std::strlen("/opt/app/prog") + 16; ++i)
    EXPECT_EQ(a.area[i], '\0') << i;
  EXPECT_EQ(a.area[std::strlen("/opt/app/prog") + 16], 'x') << "nothing past the arguments was written";
  EXPECT_STREQ(a.argv[1], "") << "no argument of the old ones is left to show";
}

TEST(process_title, a_title_longer_than_the_arguments_is_cut_to_their_space) {
  laid_out_arguments a({"./p", "-z"});
  auto written = fiber::detail::set_process_title(a.argc, a.argv, "PoolWorker-12-345 p");
  EXPECT_EQ(written, "PoolWo");  // "./p" and "-z" with their NULs: 7 bytes, less the last NUL
  EXPECT_EQ(a.area[6], '\0');
  EXPECT_EQ(a.area[7], 'x') << "nothing past the arguments was written";
}

// What ps shows for a pool's worker: its name, not the fork server's "--fiber-zygote".
TEST(process_title, a_pool_worker_shows_its_name_in_its_arguments) {
  fiber::pool p(1);
  auto cmdline = p.apply(&cmdline_of_this_worker, 0).get();
  EXPECT_NE(cmdline.find("PoolWorker-"), std::string::npos) << cmdline;
  EXPECT_EQ(cmdline.find("--fiber-"), std::string::npos) << cmdline;
}
