#include "cli/tar_archive.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

#include "fiber/error.hpp"

namespace fiber::cli {
namespace fs = std::filesystem;

namespace {
[[noreturn]] void fail(const std::string& why) { throw fiber::error(fiber::errc::config_error, why); }

/// Where an entry named `name` in an archive of `top` lands under `parent`: refused when it is
/// absolute or climbs out with "..".
fs::path placed(std::string name, const fs::path& parent, const std::string& top) {
  while (name.starts_with("./")) name.erase(0, 2);
  auto outside = [&] { fail("the archive holds an entry outside its folder: " + name); };
  if (name.empty() || name.starts_with("/")) outside();
  for (const auto& part : fs::path(name))
    if (part == "..") outside();
  auto slash = name.find('/');
  auto rest = slash == std::string::npos ? std::string() : name.substr(slash);
  return parent / (top + rest);
}

la_ssize_t append(struct archive*, void* out, const void* data, size_t n) {
  static_cast<std::string*>(out)->append(static_cast<const char*>(data), n);
  return static_cast<la_ssize_t>(n);
}
}  // namespace

std::string read_whole_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) fail("cannot read " + p.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

tar_writer::tar_writer() : a_(archive_write_new(), archive_write_free) {
  archive_write_set_format_pax_restricted(a_.get());
  archive_write_set_bytes_in_last_block(a_.get(), 1);
  archive_write_open(a_.get(), &out_, nullptr, &append, nullptr);
}
tar_writer::~tar_writer() = default;

void tar_writer::file(const std::string& path, const std::string& data, int mode) {
  entry(path, AE_IFREG, mode, data.size(), {});
  if (!data.empty() && archive_write_data(a_.get(), data.data(), data.size()) < 0) failed(path);
}
void tar_writer::directory(const std::string& path, int mode) { entry(path, AE_IFDIR, mode, 0, {}); }
void tar_writer::symlink(const std::string& path, const std::string& target) { entry(path, AE_IFLNK, 0777, 0, target); }

void tar_writer::tree(const fs::path& local, const std::string& path) {
  auto st = fs::symlink_status(local);
  auto mode = static_cast<int>(st.permissions() & fs::perms::mask);
  if (fs::is_symlink(st)) return symlink(path, fs::read_symlink(local).string());
  if (!fs::is_directory(st)) return file(path, read_whole_file(local), mode);
  directory(path, mode);
  std::vector<fs::path> children;
  for (auto& e : fs::directory_iterator(local)) children.push_back(e.path());
  std::sort(children.begin(), children.end());
  for (auto& c : children) tree(c, path + "/" + c.filename().string());
}

std::string tar_writer::finish() {
  if (archive_write_close(a_.get()) != ARCHIVE_OK) failed("the end of the archive");
  return std::move(out_);
}

void tar_writer::entry(const std::string& path, unsigned type, int mode, std::size_t size, const std::string& link) {
  std::unique_ptr<archive_entry, decltype(&archive_entry_free)> e(archive_entry_new(), archive_entry_free);
  archive_entry_set_pathname(e.get(), path.c_str());
  archive_entry_set_filetype(e.get(), type);
  archive_entry_set_perm(e.get(), mode);
  archive_entry_set_size(e.get(), static_cast<la_int64_t>(size));
  if (!link.empty()) archive_entry_set_symlink(e.get(), link.c_str());
  archive_entry_set_mtime(e.get(), 0, 0);
  if (archive_write_header(a_.get(), e.get()) != ARCHIVE_OK) failed(path);
}

void tar_writer::failed(const std::string& what) {
  fail("cannot write " + what + " into an archive: " + archive_error_string(a_.get()));
}

std::size_t extract_tar(const std::string& tar, const fs::path& parent, const std::string& top) {
  std::unique_ptr<struct archive, decltype(&archive_read_free)> in(archive_read_new(), archive_read_free);
  archive_read_support_format_tar(in.get());
  if (archive_read_open_memory(in.get(), tar.data(), tar.size()) != ARCHIVE_OK)
    fail(std::string("unreadable archive: ") + archive_error_string(in.get()));
  std::unique_ptr<struct archive, decltype(&archive_write_free)> out(archive_write_disk_new(), archive_write_free);
  // The targets are absolute (under `parent`); the entries' own names were checked below.
  archive_write_disk_set_options(out.get(), ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                                                 ARCHIVE_EXTRACT_SECURE_SYMLINKS);
  std::size_t written = 0;
  for (;;) {
    archive_entry* e = nullptr;
    auto r = archive_read_next_header(in.get(), &e);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN) fail(std::string("unreadable archive: ") + archive_error_string(in.get()));
    auto target = placed(archive_entry_pathname(e), parent, top).string();
    archive_entry_set_pathname(e, target.c_str());
    // A hard link names another entry of the archive: placed as that entry was, or it would link
    // to a file of this host named by the archive (its path taken from the working folder).
    if (const char* link = archive_entry_hardlink(e)) {
      auto linked = placed(link, parent, top).string();
      archive_entry_set_hardlink(e, linked.c_str());
    }
    if (archive_write_header(out.get(), e) < ARCHIVE_WARN)
      fail("cannot write " + target + ": " + archive_error_string(out.get()));
    const void* block = nullptr;
    size_t size = 0;
    la_int64_t offset = 0;
    while ((r = archive_read_data_block(in.get(), &block, &size, &offset)) == ARCHIVE_OK)
      if (archive_write_data_block(out.get(), block, size, offset) < ARCHIVE_WARN)
        fail("cannot write " + target + ": " + archive_error_string(out.get()));
    if (r < ARCHIVE_WARN) fail(std::string("unreadable archive: ") + archive_error_string(in.get()));
    if (archive_write_finish_entry(out.get()) < ARCHIVE_WARN)
      fail("cannot write " + target + ": " + archive_error_string(out.get()));
    ++written;
  }
  return written;
}

}  // namespace fiber::cli
