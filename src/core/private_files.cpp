#include "core/private_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "fiber/error.hpp"

namespace fiber::detail {
namespace fs = std::filesystem;

void make_private_folder(const fs::path& folder, std::error_code& ec) {
  ec.clear();
  fs::path at;
  for (const auto& part : folder) {
    at /= part;
    if (::mkdir(at.c_str(), 0700) != 0 && errno != EEXIST) {
      ec.assign(errno, std::generic_category());
      return;
    }
  }
  struct stat st {};
  if (::stat(folder.c_str(), &st) != 0) {
    ec.assign(errno, std::generic_category());
    return;
  }
  if (!S_ISDIR(st.st_mode)) {
    ec = std::make_error_code(std::errc::not_a_directory);
    return;
  }
  if (st.st_uid == ::geteuid() && (st.st_mode & 077) != 0) ::chmod(folder.c_str(), 0700);
}

int open_private_file(const fs::path& path, bool replace) {
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | (replace ? O_TRUNC : O_EXCL);
  int fd = ::open(path.c_str(), flags, 0600);
  if (fd >= 0 && replace) ::fchmod(fd, 0600);  // one that was there keeps no wider bits
  return fd;
}

std::error_code write_private_file(const fs::path& path, std::string_view bytes) {
  int fd = open_private_file(path, true);
  if (fd < 0) return {errno, std::generic_category()};
  std::error_code ec;
  for (std::size_t done = 0; done < bytes.size() && !ec;) {
    auto n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) ec.assign(errno, std::generic_category());
    else done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0 && !ec) ec.assign(errno, std::generic_category());
  return ec;
}

std::string home_folder(std::string_view below, std::string_view setting) {
  const char* home = std::getenv("HOME");
  if (!home || !*home)
    throw error(errc::config_error, "HOME is not set, and fiber keeps " + std::string(below) +
                                        " under it rather than in a folder every user of this host shares: set HOME, "
                                        "or the config key '" + std::string(setting) + "' to a folder of your own");
  return (fs::path(home) / below).string();
}

}  // namespace fiber::detail
