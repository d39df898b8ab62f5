// What a run keeps for its user alone (core/private_files): folders 0700 and files 0600 whatever
// the umask, so another user of a shared host reads no recording, no job output and no token in
// them; and no fallback to a folder every user shares when HOME is unset.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <filesystem>
#include <string>

#include "core/private_files.hpp"
#include "support.hpp"

namespace fs = std::filesystem;

namespace {
unsigned mode_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

class private_files : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fiber_test::run_folder() / ("private_files_" + std::to_string(::getpid()));
    fs::remove_all(base_);
    fs::create_directories(base_);
    old_umask_ = ::umask(0);  // the widest: every bit a file asks for is kept
  }
  void TearDown() override {
    ::umask(old_umask_);
    fs::remove_all(base_);
  }
  fs::path base_;
  mode_t old_umask_ = 0;
};
}  // namespace

TEST_F(private_files, folders_made_are_0700_and_a_wider_one_of_this_user_is_narrowed) {
  std::error_code ec;
  fiber::detail::make_private_folder(base_ / "a" / "b" / "c", ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(mode_of(base_ / "a"), 0700u);
  EXPECT_EQ(mode_of(base_ / "a" / "b" / "c"), 0700u);
  fs::create_directories(base_ / "old");
  fs::permissions(base_ / "old", fs::perms::all);  // as an earlier version left it under umask 0
  fiber::detail::make_private_folder(base_ / "old", ec);
  EXPECT_EQ(mode_of(base_ / "old"), 0700u);
  std::ofstream(base_ / "file") << "x";
  fiber::detail::make_private_folder(base_ / "file", ec);
  EXPECT_TRUE(ec);
}

TEST_F(private_files, files_are_0600_made_or_replaced_and_never_through_a_link) {
  int fd = fiber::detail::open_private_file(base_ / "new", false);
  ASSERT_GE(fd, 0);
  ::close(fd);
  EXPECT_EQ(mode_of(base_ / "new"), 0600u);
  EXPECT_LT(fiber::detail::open_private_file(base_ / "new", false), 0) << "an existing file is not taken unless replaced";
  fs::permissions(base_ / "new", fs::perms::all);
  fd = fiber::detail::open_private_file(base_ / "new", true);
  ASSERT_GE(fd, 0);
  ::close(fd);
  EXPECT_EQ(mode_of(base_ / "new"), 0600u);
  // A link another user planted where the file goes is not written through.
  std::ofstream(base_ / "victim") << "keep";
  fs::create_symlink(base_ / "victim", base_ / "planted");
  EXPECT_LT(fiber::detail::open_private_file(base_ / "planted", true), 0);
  EXPECT_TRUE(fiber::detail::write_private_file(base_ / "planted", "overwritten"));
  EXPECT_EQ(fs::file_size(base_ / "victim"), 4u);
  // Written whole, 0600.
  EXPECT_FALSE(fiber::detail::write_private_file(base_ / "whole", std::string(100000, 'w')));
  EXPECT_EQ(fs::file_size(base_ / "whole"), 100000u);
  EXPECT_EQ(mode_of(base_ / "whole"), 0600u);
}

TEST_F(private_files, without_home_the_folder_is_an_error_naming_the_setting_not_a_shared_one) {
  std::string home = std::getenv("HOME") ? std::getenv("HOME") : "";
  ::setenv("HOME", "/home/someone", 1);
  EXPECT_EQ(fiber::detail::home_folder(".fiber/slurm", "slurm_dir"), "/home/someone/.fiber/slurm");
  ::unsetenv("HOME");
  fiber_test::expect_error([] { fiber::detail::home_folder(".fiber/slurm", "slurm_dir"); }, fiber::errc::config_error,
                           {"HOME is not set", "slurm_dir"});
  ::setenv("HOME", "", 1);
  EXPECT_THROW(fiber::detail::home_folder(".local/state/fiber/runs", "record_dir"), fiber::error);
  if (!home.empty()) ::setenv("HOME", home.c_str(), 1);
}
