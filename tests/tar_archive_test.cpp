// Unpacking an archive a container handed over (`fiber cp` from Docker: cli/tar_archive). The
// archive's entries come from whatever the run's program left in its container, so each is read
// as an attacker's: nothing may land, or be linked to, outside the folder it is unpacked into.
// The archives are made here with libarchive, as a hostile container's engine would send them.
#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "cli/tar_archive.hpp"
#include "support.hpp"

namespace fs = std::filesystem;

namespace {

/// An archive whose entries are written as given: files with content, folders, hard links.
class raw_tar {
 public:
  raw_tar() : a_(archive_write_new(), archive_write_free) {
    archive_write_set_format_pax_restricted(a_.get());
    archive_write_open(a_.get(), &out_, nullptr, &append, nullptr);
  }
  raw_tar& folder(const std::string& name) { return entry(name, AE_IFDIR, 0755, {}, nullptr); }
  raw_tar& file(const std::string& name, const std::string& data) { return entry(name, AE_IFREG, 0644, data, nullptr); }
  raw_tar& hard_link(const std::string& name, const std::string& to) { return entry(name, AE_IFREG, 0644, {}, to.c_str()); }
  std::string finish() {
    archive_write_close(a_.get());
    return out_;
  }

 private:
  static la_ssize_t append(struct archive*, void* out, const void* data, size_t n) {
    static_cast<std::string*>(out)->append(static_cast<const char*>(data), n);
    return static_cast<la_ssize_t>(n);
  }
  raw_tar& entry(const std::string& name, unsigned type, int mode, const std::string& data, const char* link) {
    std::unique_ptr<archive_entry, decltype(&archive_entry_free)> e(archive_entry_new(), archive_entry_free);
    archive_entry_set_pathname(e.get(), name.c_str());
    archive_entry_set_filetype(e.get(), type);
    archive_entry_set_perm(e.get(), mode);
    archive_entry_set_size(e.get(), static_cast<la_int64_t>(data.size()));
    if (link) archive_entry_set_hardlink(e.get(), link);
    EXPECT_EQ(archive_write_header(a_.get(), e.get()), ARCHIVE_OK) << archive_error_string(a_.get());
    if (!data.empty()) archive_write_data(a_.get(), data.data(), data.size());
    return *this;
  }
  std::unique_ptr<struct archive, decltype(&archive_write_free)> a_;
  std::string out_;
};

class tar_archive : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fiber_test::run_folder() / ("tar_archive_" + std::to_string(::getpid()));
    fs::remove_all(base_);
    fs::create_directories(base_ / "dest");
    fs::create_directories(base_ / "elsewhere" / "victim");
    std::ofstream(base_ / "elsewhere" / "victim" / "secret") << "not yours";
    // A relative link target is taken from the working folder unless it is placed: put one there.
    previous_ = fs::current_path();
    fs::current_path(base_ / "elsewhere");
  }
  void TearDown() override {
    fs::current_path(previous_);
    fs::remove_all(base_);
  }
  /// Whether any file under dest is the victim file itself (a hard link to it).
  bool victim_linked() const {
    struct stat victim {};
    ::stat((base_ / "elsewhere" / "victim" / "secret").c_str(), &victim);
    for (auto& e : fs::recursive_directory_iterator(base_ / "dest")) {
      struct stat st {};
      if (::lstat(e.path().c_str(), &st) == 0 && st.st_ino == victim.st_ino && st.st_dev == victim.st_dev) return true;
    }
    return victim.st_nlink > 1;
  }

  fs::path base_, previous_;
};

}  // namespace

TEST_F(tar_archive, a_hard_link_within_the_archive_lands_beside_its_target) {
  auto tar = raw_tar().folder("out").file("out/a.txt", "alpha").hard_link("out/b.txt", "out/a.txt").finish();
  EXPECT_EQ(fiber::cli::extract_tar(tar, base_ / "dest", "copy"), 3u);
  std::ifstream b(base_ / "dest" / "copy" / "b.txt");
  std::string text((std::istreambuf_iterator<char>(b)), {});
  EXPECT_EQ(text, "alpha");
  EXPECT_TRUE(fs::equivalent(base_ / "dest" / "copy" / "a.txt", base_ / "dest" / "copy" / "b.txt"));
}

TEST_F(tar_archive, a_hard_link_to_a_file_of_this_host_is_never_made) {
  // Named as a path of the working folder: it is placed under the copy, where no such file is.
  auto relative = raw_tar().folder("out").hard_link("out/grab", "victim/secret").finish();
  try {
    fiber::cli::extract_tar(relative, base_ / "dest", "copy");
  } catch (const fiber::error&) {  // refused: nothing to link to inside the copy
  }
  EXPECT_FALSE(victim_linked());
  // Absolute, or climbing out: refused, naming the entry.
  auto absolute = raw_tar().folder("out").hard_link("out/grab", (base_ / "elsewhere" / "victim" / "secret").string()).finish();
  fiber_test::expect_error([&] { fiber::cli::extract_tar(absolute, base_ / "dest", "copy2"); }, fiber::errc::config_error,
                           "outside its folder");
  auto climbing = raw_tar().folder("out").hard_link("out/grab", "out/../../elsewhere/victim/secret").finish();
  fiber_test::expect_error([&] { fiber::cli::extract_tar(climbing, base_ / "dest", "copy3"); }, fiber::errc::config_error,
                           "outside its folder");
  EXPECT_FALSE(victim_linked());
}

TEST_F(tar_archive, entries_that_are_absolute_or_climb_out_are_refused) {
  auto absolute = raw_tar().file("/etc/fiber-test-owned", "x").finish();
  fiber_test::expect_error([&] { fiber::cli::extract_tar(absolute, base_ / "dest", "copy"); }, fiber::errc::config_error,
                           "outside its folder");
  auto climbing = raw_tar().folder("out").file("out/../../escaped", "x").finish();
  fiber_test::expect_error([&] { fiber::cli::extract_tar(climbing, base_ / "dest", "copy"); }, fiber::errc::config_error,
                           "outside its folder");
  EXPECT_FALSE(fs::exists(base_ / "escaped"));
  EXPECT_FALSE(fs::exists("/etc/fiber-test-owned"));
}
