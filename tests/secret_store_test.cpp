// Where a backend keeps the job's credentials for its children (backend/secret_store): a child
// (another process of this user) reads them by path, nobody can change them, and they go with the
// backend; the files of a shared file system are 0600 in a folder of 0700.
#include "backend/secret_store.hpp"

#include "backend/command.hpp"
#include "fiber/error.hpp"
#include "support.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace fs = std::filesystem;
using fiber::detail::secret_store;

namespace {
unsigned mode_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

/// What another process (a child, as a worker is) reads at `path`.
std::string read_in_another_process(const std::string& path) { return fiber::detail::run_command({"cat", path}).out; }
}  // namespace

TEST(secret_store, in_memory_a_child_reads_the_text_by_its_path_and_cannot_change_it) {
  auto store = secret_store::in_memory();
  auto path = store.path_for("curve,the-keys");
  EXPECT_TRUE(path.starts_with("/proc/" + std::to_string(::getpid()) + "/fd/")) << path;
  EXPECT_EQ(read_in_another_process(path), "curve,the-keys");
  EXPECT_EQ(store.path_for("curve,the-keys"), path);  // one per text
  auto other = store.path_for("plain,another");
  EXPECT_NE(other, path);
  EXPECT_EQ(read_in_another_process(other), "plain,another");
  // Sealed: a sibling that opens it for writing changes nothing the next child reads.
  std::ofstream(path) << "forged";
  EXPECT_EQ(read_in_another_process(path), "curve,the-keys");
}

TEST(secret_store, in_memory_it_goes_with_the_store) {
  std::string path;
  {
    auto store = secret_store::in_memory();
    path = store.path_for("curve,x");
  }
  EXPECT_FALSE(fs::exists(path));
}

TEST(secret_store, in_a_folder_each_text_is_a_0600_file_in_a_0700_folder_removed_with_the_store) {
  auto root = fiber_test::run_folder() / ("secret_store_" + std::to_string(::getpid()));
  fs::remove_all(root);
  auto old = ::umask(0);  // the widest umask: every bit is fiber's choice
  std::string path;
  {
    auto store = secret_store::in_folder(root);
    path = store.path_for("curve,the-keys");
    ::umask(old);
    EXPECT_TRUE(path.starts_with(root.string() + "/keys-")) << path;
    EXPECT_EQ(mode_of(path), 0600u);
    EXPECT_EQ(mode_of(fs::path(path).parent_path()), 0700u);
    EXPECT_EQ(mode_of(root), 0700u);
    EXPECT_EQ(read_in_another_process(path), "curve,the-keys");
    EXPECT_EQ(store.path_for("curve,the-keys"), path);
    EXPECT_NE(store.path_for("curve,other"), path);
  }
  EXPECT_FALSE(fs::exists(fs::path(path).parent_path()));
  EXPECT_TRUE(fs::exists(root));  // the user's folder stays; only the store's own goes
  fs::remove_all(root);
}

TEST(secret_store, a_folder_that_cannot_be_made_is_an_error_naming_it) {
  auto store = secret_store::in_folder("/proc/no-such-folder/here");
  fiber_test::expect_error([&] { (void)store.path_for("curve,x"); }, fiber::errc::spawn_failed,
                           "/proc/no-such-folder/here");
}
