// A packed file tree (src/core/file_tree): what `fiber cp` carries to and from a claim on
// Kubernetes. Round trips of files, folders, links and modes; bytes that are no tree, paths that
// leave it, links it would write through, and the size bound.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/file_tree.hpp"
#include "fiber/error.hpp"

#include "run_folder.hpp"

namespace fs = std::filesystem;
using fiber::detail::pack_tree;
using fiber::detail::unpack_tree;

namespace {

constexpr std::uint64_t plenty = std::uint64_t{1} << 30;

fs::path fresh(const std::string& name) {
  auto dir = fiber_test::run_folder() / ("file_tree_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

fiber::errc code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const fiber::error& e) {
    return static_cast<fiber::errc>(e.code().value());
  }
  return fiber::errc{};
}

/// A tree by hand: one entry of `kind` at `path` (after the top folder).
std::string with_entry(char kind, const std::string& path, const std::string& content) {
  std::string out = "fiber-tree/1\n";
  auto put = [&](std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  auto entry = [&](char k, const std::string& p, const std::string& c) {
    out.push_back(k);
    put(0755, 4);
    put(p.size(), 4);
    out += p;
    put(c.size(), 8);
    out += c;
  };
  entry('d', "", "");
  entry(kind, path, content);
  return out;
}

}  // namespace

TEST(file_tree, a_folder_with_files_links_and_modes_round_trips) {
  auto dir = fresh("round");
  fs::create_directories(dir / "src" / "deep" / "empty");
  std::ofstream(dir / "src" / "a.txt") << "alpha\n";
  std::ofstream(dir / "src" / "deep" / "b.bin") << std::string(70000, '\0') + "end";
  fs::permissions(dir / "src" / "a.txt", fs::perms::owner_read | fs::perms::owner_exec);
  fs::permissions(dir / "src" / "deep", fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  fs::create_symlink("deep/b.bin", dir / "src" / "link");
  auto packed = pack_tree(dir / "src", plenty);
  EXPECT_EQ(unpack_tree(packed, dir, "copy"), 6u);  // the top, a.txt, deep, empty, b.bin, link
  EXPECT_EQ(read(dir / "copy" / "a.txt"), "alpha\n");
  EXPECT_EQ(read(dir / "copy" / "deep" / "b.bin"), std::string(70000, '\0') + "end");
  EXPECT_TRUE(fs::is_directory(dir / "copy" / "deep" / "empty"));
  EXPECT_EQ(fs::status(dir / "copy" / "a.txt").permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_exec);
  EXPECT_EQ(fs::status(dir / "copy" / "deep").permissions() & fs::perms::all,
            fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  ASSERT_TRUE(fs::is_symlink(dir / "copy" / "link"));
  EXPECT_EQ(fs::read_symlink(dir / "copy" / "link"), "deep/b.bin");
  // The same content packs to the same bytes.
  EXPECT_EQ(pack_tree(dir / "copy", plenty), packed);
}

TEST(file_tree, a_file_lands_under_the_name_given_and_replaces_one_there) {
  auto dir = fresh("file");
  std::ofstream(dir / "one") << "new";
  std::ofstream(dir / "other") << "old content";
  EXPECT_EQ(unpack_tree(pack_tree(dir / "one", plenty), dir, "other"), 1u);
  EXPECT_EQ(read(dir / "other"), "new");
}

TEST(file_tree, bytes_that_are_no_tree_are_refused_and_nothing_is_written) {
  auto dir = fresh("malformed");
  std::ofstream(dir / "f") << "data";
  auto packed = pack_tree(dir / "f", plenty);
  EXPECT_EQ(code_of([&] { unpack_tree("not a tree", dir, "x"); }), fiber::errc::malformed_message);
  EXPECT_EQ(code_of([&] { unpack_tree(packed.substr(0, packed.size() - 1), dir, "x"); }), fiber::errc::malformed_message);
  EXPECT_EQ(code_of([&] { unpack_tree(with_entry('q', "a", ""), dir, "y"); }), fiber::errc::malformed_message);
  EXPECT_FALSE(fs::exists(dir / "x"));
}

TEST(file_tree, a_path_that_leaves_the_tree_is_refused) {
  auto dir = fresh("escape");
  fs::create_directories(dir / "inner");
  for (auto path : {"../outside", "a/../../outside", "/abs", "a//b", "./a"})
    EXPECT_EQ(code_of([&] { unpack_tree(with_entry('f', path, "x"), dir / "inner", "t"); }), fiber::errc::malformed_message)
        << path;
  EXPECT_FALSE(fs::exists(dir / "outside"));
  EXPECT_FALSE(fs::exists(dir / "inner" / "outside"));
  EXPECT_EQ(code_of([&] { unpack_tree(with_entry('f', "a", "x"), dir, ".."); }), fiber::errc::malformed_message);
}

TEST(file_tree, nothing_is_written_through_a_link) {
  auto dir = fresh("links");
  fs::create_directories(dir / "elsewhere");
  fs::create_directories(dir / "dest" / "t");
  fs::create_symlink(dir / "elsewhere", dir / "dest" / "t" / "sub");
  // A link already at the destination.
  EXPECT_EQ(code_of([&] { unpack_tree(with_entry('f', "sub/x", "x"), dir / "dest", "t"); }), fiber::errc::config_error);
  EXPECT_FALSE(fs::exists(dir / "elsewhere" / "x"));
  // A link of the tree itself, then a file below it: the link is made last, so the file has no
  // folder to go into.
  std::string both = with_entry('l', "l", (dir / "elsewhere").string());
  auto more = with_entry('f', "l/y", "y");
  both += more.substr(std::string("fiber-tree/1\n").size() + 17);  // the second entry alone
  EXPECT_NE(code_of([&] { unpack_tree(both, dir / "dest", "u"); }), fiber::errc{});
  EXPECT_FALSE(fs::exists(dir / "elsewhere" / "y"));
}

TEST(file_tree, a_tree_over_the_bound_is_refused_when_packed) {
  auto dir = fresh("bound");
  std::ofstream(dir / "big") << std::string(5000, 'b');
  EXPECT_EQ(code_of([&] { pack_tree(dir / "big", 4096); }), fiber::errc::message_too_large);
  EXPECT_EQ(code_of([&] { pack_tree(dir / "missing", plenty); }), fiber::errc::config_error);
}
