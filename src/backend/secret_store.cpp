#include "backend/secret_store.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/private_files.hpp"
#include "fiber/error.hpp"

namespace fiber::detail {
namespace fs = std::filesystem;

namespace {
[[noreturn]] void cannot(const std::string& what, int err) {
  throw error(errc::spawn_failed, "cannot keep the job's credentials for its children: " + what + ": " +
                                      std::strerror(err));
}
}  // namespace

secret_store secret_store::in_memory() { return secret_store(); }

secret_store secret_store::in_folder(fs::path root) {
  secret_store s;
  s.root_ = std::move(root);
  return s;
}

secret_store::secret_store(secret_store&& o) noexcept
    : root_(std::move(o.root_)), folder_(std::move(o.folder_)), paths_(std::move(o.paths_)), fds_(std::move(o.fds_)) {
  o.folder_.clear();
  o.fds_.clear();
}

secret_store::~secret_store() {
  for (auto& [text, fd] : fds_) ::close(fd);
  if (!folder_.empty()) {
    std::error_code ec;
    fs::remove_all(folder_, ec);
  }
}

std::string secret_store::path_for(const std::string& text) {
  if (auto it = paths_.find(text); it != paths_.end()) return it->second;
  std::string path;
  if (root_.empty()) {
    // Close-on-exec: no child inherits it, each opens it by name.
    int fd = ::memfd_create("fiber-keys", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) cannot("memfd_create", errno);
    ::fchmod(fd, 0600);
    for (std::size_t done = 0; done < text.size();) {
      auto n = ::write(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        int err = errno;
        ::close(fd);
        cannot("writing a memfd", err);
      }
      done += static_cast<std::size_t>(n);
    }
    // Sealed: no child that opens it can change what its siblings read.
    ::fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL);
    fds_.emplace(text, fd);
    path = "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(fd);
  } else {
    if (folder_.empty()) {
      std::error_code ec;
      make_private_folder(root_, ec);
      if (ec) cannot(root_.string(), ec.value());
      auto pattern = (root_ / "keys-XXXXXX").string();
      if (!::mkdtemp(pattern.data())) cannot(pattern, errno);  // 0700, a name no one could take first
      folder_ = pattern;
    }
    auto file = folder_ / std::to_string(paths_.size() + 1);
    if (auto ec = write_private_file(file, text)) cannot(file.string(), ec.value());
    path = file.string();
  }
  paths_.emplace(text, path);
  return path;
}

}  // namespace fiber::detail
