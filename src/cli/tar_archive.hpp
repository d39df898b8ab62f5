// Tar archives in memory (libarchive): the build context sent to the engine, and what `fiber cp`
// sends into a claim or brings out of one.
#pragma once
#include <filesystem>
#include <memory>
#include <string>

struct archive;

namespace fiber::cli {

/// A tar archive built in memory, its entries in the order added, owners and times zeroed so
/// that the same content gives the same bytes (and the same digest, and the same tag).
/// fiber::error(config_error) when an entry cannot be written.
class tar_writer {
 public:
  tar_writer();
  ~tar_writer();
  void file(const std::string& path, const std::string& data, int mode);
  void directory(const std::string& path, int mode);
  void symlink(const std::string& path, const std::string& target);
  /// `local` (a file, a folder with everything under it, or a link) as `path` in the archive.
  void tree(const std::filesystem::path& local, const std::string& path);
  std::string finish();

 private:
  void entry(const std::string& path, unsigned type, int mode, std::size_t size, const std::string& link);
  [[noreturn]] void failed(const std::string& what);
  std::string out_;
  std::unique_ptr<struct archive, int (*)(struct archive*)> a_;
};

/// Reads `local` whole; fiber::error(config_error) naming it when it cannot.
std::string read_whole_file(const std::filesystem::path& p);

/// Writes the entries of `tar` under `parent`, the first path component of each renamed to
/// `top` (the archive of one file or folder, as the engine's archive endpoint gives it).
/// Entries that would land outside `parent` (absolute, "..", through a link) are refused.
/// Returns how many entries were written; fiber::error(config_error) naming what failed.
std::size_t extract_tar(const std::string& tar, const std::filesystem::path& parent, const std::string& top);

}  // namespace fiber::cli
